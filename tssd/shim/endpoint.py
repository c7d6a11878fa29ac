"""Where a client finds tssd, the token it shows, and what an answer must be.

Shared by both clients, :mod:`tssd.shim.fastclient` (``tss-hsm``) and :mod:`tssd.wire`
(``tssctl``), so that they resolve the same target and judge an answer alike. It imports
only ``os`` and :mod:`tssd.errors`: ``tss-hsm`` pays for every module it loads, once per
file dCache hands it.

Target resolution, first match wins: the explicit target (``-tssd=`` / ``--tssd``),
``$TSSD_URL``, the state directory's socket (``$TSSD_HOME/tssd.sock``, else
``~/.local/state/tssd/tssd.sock``) when it exists, the shipped unit's socket
``/run/tssd/tssd.sock`` when it exists, and else the state directory's socket again (so
that an error names the place the user's own daemon would be). A target is a socket path
(``/run/tssd/tssd.sock`` or ``unix:/path``) or an ``http(s)://`` URL.
"""

from __future__ import annotations

import os

from tssd.errors import ApiError, WireError

TYPE_CHECKING = False  # typing costs tss-hsm an import; only the type checker needs Any
if TYPE_CHECKING:
    from typing import Any

#: The state directory when neither ``$TSSD_HOME`` nor the configuration names one.
DEFAULT_HOME = "~/.local/state/tssd"
#: The API socket of the shipped systemd unit (deploy/tssd.service, api.socket there).
SYSTEM_SOCKET = "/run/tssd/tssd.sock"


def resolve_target(explicit: str | None = None, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if explicit:
        return explicit
    if env.get("TSSD_URL"):
        return env["TSSD_URL"]
    home = env.get("TSSD_HOME") or DEFAULT_HOME
    own = os.path.join(os.path.expanduser(home), "tssd.sock")
    # The unit's daemon keeps its state in /var/lib/tssd but its socket in /run/tssd:
    # an operator's shell (or a pool) knows neither, and needs no flag to find it.
    if not os.path.exists(own) and os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return own


def read_token(environ: dict[str, str] | None = None) -> str | None:
    """The bearer token in ``$TSSD_TOKEN_FILE``, None when unset or the file is empty.

    Raises WireError when the file cannot be read: a client that was told to show a token
    must not call without one and be taken for an anonymous reader.
    """
    env = os.environ if environ is None else environ
    path = env.get("TSSD_TOKEN_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError as exc:
        raise WireError(f"cannot read token file {path}: {exc.strerror}") from exc


def answer(target: str, status: int, data: object) -> dict[str, Any]:
    """The decoded body of one answer, as the API promises it: a JSON object.

    Raises WireError when it is not an object, ApiError on an error status.
    """
    if not isinstance(data, dict):
        raise WireError(f"tssd at {target} sent an unexpected answer")
    if status >= 400:
        raise ApiError(status, data)
    return data


def overdue(target: str, seconds: float) -> WireError:
    """The error of an exchange that outlived its deadline (connect, request, answer).

    Both clients hold one deadline per exchange, not one per socket operation: a server
    that drips a byte at a time would otherwise hold a call for as long as it likes.
    """
    return WireError(f"tssd at {target} gave no complete answer within {seconds:g} s")

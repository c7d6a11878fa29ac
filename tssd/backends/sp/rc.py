"""SP return codes as tssd's errors: the one translation at the API boundary.

The transient codes (a tape busy or not mountable now, mount points exhausted, the server
short of space, the session lost) become :class:`~tssd.errors.TransientBackendError`, so
that :mod:`tssd.retry` retries them with backoff and counts them; every other code fails
the request as a :class:`~tssd.errors.PermanentBackendError`. The message is the
library's own text (``dsmRCMsg``) after what tssd was doing.
"""

from __future__ import annotations

from tssd.backends.sp import abi_consts as c
from tssd.errors import BackendError, ObjectNotFound, PermanentBackendError, TransientBackendError

#: Codes meaning the object is not (or no longer) on the server.
_NOT_FOUND = frozenset(
    {c.DSM_RC_ABORT_NO_MATCH, c.DSM_RC_OBJID_NOTFOUND, c.DSM_RC_FILE_SPACE_NOT_FOUND}
)


class SpCallFailed(Exception):
    """Raised on a session's thread by a failing API call; translated by :func:`translate`.

    Kept apart from tssd's tree so that the thread reports the bare facts and the event
    loop side decides what they mean.
    """

    def __init__(self, call: str, rc: int, message: str) -> None:
        super().__init__(f"{call}: {message} (rc {rc})")
        self.call = call
        self.rc = rc
        self.message = message


def is_transient(rc: int) -> bool:
    return rc in c.TRANSIENT_RCS


def session_lost(rc: int) -> bool:
    """Whether the session must be ended and signed on again after *rc*."""
    return rc in c.SESSION_LOST_RCS


def translate(failure: SpCallFailed, what: str) -> BackendError:
    """The tssd error for *failure* while doing *what* (e.g. "retrieve of 0000AB..")."""
    text = f"{what}: {failure}"
    if is_transient(failure.rc):
        return TransientBackendError(text, code=failure.rc)
    if failure.rc in _NOT_FOUND:
        return ObjectNotFound(text, code=failure.rc)
    return PermanentBackendError(text, code=failure.rc)

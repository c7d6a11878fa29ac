"""A small HTTP/JSON client for the tssd API, standard library only.

Shared by ``tss-hsm`` (which must import nothing but the standard library, so that one
call costs little more than starting the interpreter) and ``tssctl``. It speaks HTTP/1.1
over the daemon's Unix socket or over TCP.

Target resolution, first match wins: the explicit target (``-tssd=`` / ``--tssd``),
``$TSSD_URL``, ``$TSSD_HOME/tssd.sock``, ``~/.local/state/tssd/tssd.sock``. A target is
a socket path (``/run/tssd/tssd.sock`` or ``unix:/path``) or an ``http(s)://`` URL.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import Any
from urllib.parse import urlsplit

DEFAULT_HOME = "~/.local/state/tssd"


class WireError(Exception):
    """tssd could not be reached, or answered with something that is not the API."""


class ApiError(Exception):
    """tssd answered with an error status; ``payload`` is its JSON error object."""

    def __init__(self, status: int, payload: dict[str, Any]) -> None:
        raw = payload.get("error")
        err: dict[str, Any] = raw if isinstance(raw, dict) else {}
        message = str(err.get("message") or payload or f"HTTP {status}")
        super().__init__(message)
        self.status = status
        self.type = str(err.get("type", "Error"))
        self.message = message
        self.exit_code = int(err.get("exit_code", 1))


def resolve_target(explicit: str | None = None, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if explicit:
        return explicit
    if env.get("TSSD_URL"):
        return env["TSSD_URL"]
    home = env.get("TSSD_HOME") or DEFAULT_HOME
    return os.path.join(os.path.expanduser(home), "tssd.sock")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Client:
    """Blocking JSON client. Each call opens one connection (calls are rare and short)."""

    def __init__(self, target: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = resolve_target(target)
        self.timeout = timeout
        self._token = self._read_token()

    @staticmethod
    def _read_token() -> str | None:
        path = os.environ.get("TSSD_TOKEN_FILE")
        if not path:
            return None
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip() or None
        except OSError as exc:
            raise WireError(f"cannot read token file {path}: {exc.strerror}") from exc

    def _connection(self, timeout: float) -> tuple[http.client.HTTPConnection, str]:
        target = self.target
        if target.startswith(("http://", "https://")):
            parts = urlsplit(target)
            cls = (
                http.client.HTTPSConnection
                if parts.scheme == "https"
                else http.client.HTTPConnection
            )
            return cls(parts.netloc, timeout=timeout), parts.path.rstrip("/")
        path = target.removeprefix("unix:")
        return _UnixConnection(path, timeout), ""

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request; return the decoded JSON object.

        Raises WireError when tssd is unreachable, ApiError on an HTTP error status.
        """
        conn, prefix = self._connection(timeout or self.timeout)
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            conn.request(method, prefix + path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise WireError(f"tssd unreachable at {self.target}: {exc}") from exc
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise WireError(
                f"tssd at {self.target} sent non-JSON (HTTP {response.status})"
            ) from exc
        if not isinstance(data, dict):
            raise WireError(f"tssd at {self.target} sent an unexpected answer")
        if response.status >= 400:
            raise ApiError(response.status, data)
        return data

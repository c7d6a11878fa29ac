"""A small HTTP/JSON client for the tssd API, standard library only: ``tssctl``'s.

It speaks HTTP/1.1 over the daemon's Unix socket or over TCP, TLS included. ``tss-hsm``
uses :mod:`tssd.shim.fastclient`, which costs less to import, and this client only for
``https://``. Both find tssd, show their token and judge an answer through
:mod:`tssd.shim.endpoint`, and raise the same :class:`~tssd.errors.WireError` and
:class:`~tssd.errors.ApiError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from tssd.errors import ApiError, WireError
from tssd.shim.endpoint import answer, overdue, read_token, resolve_target

__all__ = ["ApiError", "Client", "WireError", "resolve_target"]


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


class _Deadline:
    """One deadline for a whole exchange: connect, request and the complete answer.

    http.client's timeout bounds each socket operation, so a server that drips one byte
    a second holds a call for as long as it likes. When the deadline passes, this shuts
    the connection's socket down from a watching thread, which ends the blocked read (TLS
    included). A connection not yet made is cut as soon as it is (its own connect is
    bounded by the same timeout).
    """

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self.expired = False
        self._conn = conn
        self._seconds = seconds
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="tssd-deadline", daemon=True)

    def __enter__(self) -> _Deadline:
        self._watcher.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._watcher.join()

    def _watch(self) -> None:
        if self._done.wait(self._seconds):
            return
        self.expired = True
        while not self._done.is_set():
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._done.wait(0.05)


class Client:
    """Blocking JSON client. Each call opens one connection (calls are rare and short)."""

    def __init__(self, target: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = resolve_target(target)
        self.timeout = timeout
        self._token = read_token()

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
        limit = timeout or self.timeout
        conn, prefix = self._connection(limit)
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        deadline = _Deadline(conn, limit)
        try:
            with deadline:
                conn.request(method, prefix + path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise overdue(self.target, limit) from exc
            raise WireError(f"tssd unreachable at {self.target}: {exc}") from exc
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise WireError(
                f"tssd at {self.target} sent non-JSON (HTTP {response.status})"
            ) from exc
        return answer(self.target, response.status, data)

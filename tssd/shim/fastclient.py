"""A minimal HTTP/1.1 JSON client for tss-hsm: one request per connection.

:mod:`tssd.wire` (``http.client``, ``json``, ``socket``) costs about 60 ms to import, four
times the interpreter's own start-up; this client uses the C modules underneath them
(``_socket``, ``_json``) and costs well under one. It speaks to tssd only: a Unix socket or
``http://``; ``https://`` is handed to :mod:`tssd.wire`, whose import cost TLS dwarfs.

The target, the token and the judging of an answer are :mod:`tssd.shim.endpoint`'s, shared
with :mod:`tssd.wire`, and so are the errors raised (:class:`~tssd.errors.WireError`,
:class:`~tssd.errors.ApiError`).
"""

from __future__ import annotations

import _json
import _socket
import time

from tssd.errors import ApiError, WireError
from tssd.shim.endpoint import answer, overdue, read_token, resolve_target

__all__ = ["ApiError", "Client", "WireError", "decode", "encode"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_ANSWER = 64 << 20


class _Context:
    """What ``_json.make_scanner`` reads from a ``json.JSONDecoder``, with json's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity: float() reads all three
    memo: dict[str, str] = {}


# typeshed types the argument as a JSONDecoder; the scanner reads only _Context's attributes.
_scan = _json.make_scanner(_Context())  # type: ignore[arg-type]


def decode(text: str) -> Any:
    """``json.loads`` for a complete document, without importing json (and re, enum...)."""
    body = text.strip(" \t\r\n")
    try:
        value, end = _scan(body, 0)
    except (StopIteration, ValueError) as exc:
        raise ValueError("not JSON") from exc
    if end != len(body):
        raise ValueError("trailing data after JSON")
    return value


def encode(value: Any) -> str:
    """``json.dumps`` for the shapes tss-hsm sends: dicts, lists, str, int, bool, None."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return str(_json.encode_basestring_ascii(value))
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dict):
        items = (f"{encode(str(k))}:{encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__}")


class Client:
    """Blocking JSON client. Each call opens one connection (calls are rare and short)."""

    def __init__(self, target: str | None = None, *, timeout: float = 30.0) -> None:
        self.target = resolve_target(target)
        self.timeout = timeout
        self._token = read_token()
        self._https: Any = None

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one request; return the decoded JSON object.

        Raises WireError when tssd is unreachable, ApiError on an HTTP error status.
        """
        if self.target.startswith("https://"):
            return self._call_https(method, path, body, timeout)
        limit = timeout or self.timeout
        try:
            status, raw = self._exchange(method, path, body, limit)
        except TimeoutError as exc:
            raise overdue(self.target, limit) from exc
        except OSError as exc:
            raise WireError(f"tssd unreachable at {self.target}: {exc}") from exc
        try:
            data = decode(raw.decode("utf-8")) if raw else {}
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise WireError(f"tssd at {self.target} sent non-JSON (HTTP {status})") from exc
        return answer(self.target, status, data)

    def _exchange(self, method: str, path: str, body: Any, timeout: float) -> tuple[int, bytes]:
        # One deadline for connect, request and the whole answer: a socket timeout alone
        # restarts with every byte, and a server that drips one byte a second would hold
        # the call (and the pool's script slot) without end.
        deadline = time.monotonic() + timeout
        sock, host, prefix = self._connect(timeout)
        try:
            sock.settimeout(_left(deadline))
            sock.sendall(self._request(method, prefix + path, host, body))
            chunks = []
            received = 0
            while True:
                sock.settimeout(_left(deadline))
                if not (chunk := sock.recv(65536)):
                    break
                chunks.append(chunk)
                received += len(chunk)
                if received > MAX_ANSWER:
                    raise WireError(f"tssd at {self.target} sent more than {MAX_ANSWER} bytes")
        finally:
            sock.close()
        return self._response(b"".join(chunks))

    def _connect(self, timeout: float) -> tuple[_socket.socket, str, str]:
        target = self.target
        if target.startswith("http://"):
            hostport, _, path = target[len("http://") :].partition("/")
            host, port = _split_hostport(hostport)
            family, kind, proto, _, inet = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)[
                0
            ]
            sock = _socket.socket(family, kind, proto)
            address: Any = inet
            prefix = ("/" + path).rstrip("/")
        else:
            address, hostport, prefix = target.removeprefix("unix:"), "localhost", ""
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            _connect_waiting(sock, address, timeout)
        except BaseException:
            sock.close()
            raise
        return sock, hostport, prefix

    def _request(self, method: str, path: str, host: str, body: Any) -> bytes:
        payload = b"" if body is None else encode(body).encode("ascii")
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {host}",
            "Accept: application/json",
            "Connection: close",
            "User-Agent: tss-hsm",
            f"Content-Length: {len(payload)}",
        ]
        if body is not None:
            lines.append("Content-Type: application/json")
        if self._token:
            lines.append(f"Authorization: Bearer {self._token}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload

    def _response(self, raw: bytes) -> tuple[int, bytes]:
        head, sep, body = raw.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise WireError(f"tssd at {self.target} sent no HTTP answer")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            try:
                body = _dechunk(body)
            except ValueError as exc:
                raise WireError(f"tssd at {self.target} sent a malformed chunked body") from exc
        elif headers.get("content-length", "").isdigit():
            body = body[: int(headers["content-length"])]
        return int(parts[1]), body

    def _call_https(
        self, method: str, path: str, body: Any, timeout: float | None
    ) -> dict[str, Any]:
        from tssd import wire

        if self._https is None:
            self._https = wire.Client(self.target, timeout=self.timeout)
        reply: dict[str, Any] = self._https.call(method, path, body, timeout=timeout)
        return reply


def _connect_waiting(sock: _socket.socket, address: Any, timeout: float) -> None:
    """Connect; wait while tssd's listen backlog is full instead of failing.

    A socket with a timeout is non-blocking underneath, and a Unix socket whose backlog is
    full then refuses at once with EAGAIN, where a blocking connect would wait: hundreds of
    pool calls arriving together must queue, not fail with exit 1.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock.connect(address)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.002)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _split_hostport(hostport: str) -> tuple[str, int]:
    if hostport.startswith("["):  # [::1]:8080
        host, _, rest = hostport[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if port and not port.isdigit():
        raise WireError(f"bad port in tssd URL: {hostport!r}")
    return host, int(port) if port else 80


def _dechunk(body: bytes) -> bytes:
    out = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out.append(body[:size])
        body = body[size + 2 :]
    return b"".join(out)

"""Connections a listener takes: a cap per listener, and the descriptor limit raised.

Found by attack (docs/reliability.md): 1,100 idle TCP connections used up the process's
descriptors, so ``accept`` on the Unix socket failed and dCache's ``tss-hsm`` calls with
it. Each listener now takes at most its cap of connections; one more is answered
``503`` (with ``Retry-After``) and closed at once, and refusals are logged. The TCP cap
is lowered at start until the Unix socket's cap and a reserve for everything else (the
database, tape devices, files being copied) fit in the descriptor limit, so no number of
TCP clients can starve the pools. Slow and idle clients are closed by the header timeout
(``limits.header_timeout_s``, aiohttp's keep-alive timer, which runs from the moment a
connection opens until its request's headers are complete).
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from aiohttp import web

log = structlog.get_logger()

CreateServer = Callable[[Callable[[], asyncio.BaseProtocol]], Awaitable[asyncio.AbstractServer]]


def raise_nofile() -> int:
    """Raise the soft descriptor limit to the hard one; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("api.nofile_not_raised", soft=soft, hard=hard, error=str(exc))
    return soft


@dataclass(frozen=True)
class Caps:
    tcp: int
    unix: int


def connection_caps(nofile: int, tcp: int, unix: int, reserve: int) -> Caps:
    """Caps that fit in *nofile* descriptors; the Unix socket's share is kept whole first."""
    unix = max(1, min(unix, nofile - reserve - 1))
    tcp = max(0, min(tcp, nofile - reserve - unix))
    return Caps(tcp=tcp, unix=unix)


class Refusals:
    """Counts refused connections of one listener; logs at most one line per interval."""

    def __init__(self, listener: str, interval_s: float = 10.0) -> None:
        self.listener = listener
        self.interval_s = interval_s
        self.total = 0
        self._unlogged = 0
        self._logged_at = float("-inf")

    def refused(self, open_now: int, cap: int) -> None:
        self.total += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval_s:
            log.warning("api.connection_refused", listener=self.listener, open=open_now,
                        cap=cap, refused=self._unlogged, total=self.total)  # fmt: skip
            self._unlogged = 0
            self._logged_at = now


def _refusal_bytes(retry_after_s: int) -> bytes:
    message = "tssd has too many open connections; retry"
    error = {"type": "TooManyConnections", "exit_code": 72, "message": message}
    body = json.dumps({"error": error})
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: {retry_after_s}\r\n"
        "Connection: close\r\n\r\n"
    )
    return (head + body).encode()


class _Refuse(asyncio.Protocol):
    """Answers 503 without reading anything, and closes."""

    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(self._answer)
        transport.close()


class CappedSite(web.BaseSite):
    """A listener of *runner* that takes at most *cap* connections at a time."""

    def __init__(
        self, runner: web.BaseRunner, name: str, create: CreateServer, cap: int,
        retry_after_s: int = 1,
    ) -> None:  # fmt: skip
        super().__init__(runner)
        self._name = name
        self._create = create
        self.cap = cap
        self.refusals = Refusals(name)
        self._answer = _refusal_bytes(retry_after_s)

    @property
    def name(self) -> str:
        return self._name

    def _factory(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        open_now = len(server.connections)
        if open_now >= self.cap:
            self.refusals.refused(open_now, self.cap)
            return _Refuse(self._answer)
        return server()

    async def start(self) -> None:
        await super().start()
        self._server = await self._create(self._factory)

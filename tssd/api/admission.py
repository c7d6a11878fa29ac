"""Admission control: past a number of open requests, or while the event loop runs late,
new submits get ``503`` with ``Retry-After`` (``tss-hsm`` exits 72; dCache calls again).

Polls, reads and cancels are always admitted: they are how the backlog drains. The
open-request count is read from the database every ``REFRESH_S`` (in a worker thread, by
the database driver) and advanced by every admitted submit in between; the loop's lag is
measured every ``TICK_S`` and a lag above ``limits.max_loop_lag_s`` refuses submits for
the next second.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from aiohttp import web
from sqlalchemy import func, select

from tssd.config.sections import LimitsSettings
from tssd.db.models import OPEN_STATES, Request
from tssd.db.store import RequestStore
from tssd.errors import TssdError

log = structlog.get_logger()
TICK_S = 0.1
REFRESH_S = 5.0
#: A lag above this is logged as ``loop.stall`` (the benchmark's bound).
STALL_LOG_S = 0.1
#: How long one late tick keeps submits refused.
LAG_HOLD_S = 1.0


class Overloaded(TssdError):
    """tssd admits no new requests now; the client retries after ``retry_after_s``."""

    exit_code = 72

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Admission:
    """The admission state one daemon's listeners share (``request.app[ADMISSION]``)."""

    def __init__(self, settings: LimitsSettings, store: RequestStore) -> None:
        self.settings = settings
        self.store = store
        self.open_requests = 0
        self.max_lag_s = 0.0
        self.refused = 0
        self._late_until = float("-inf")
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self._count()
        self._tasks = [
            asyncio.create_task(self._watch_loop(), name="admission-lag"),
            asyncio.create_task(self._recount(), name="admission-count"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def admit(self, count: int = 1) -> None:
        """Raise :class:`Overloaded` unless *count* more requests may be submitted."""
        limit = self.settings.max_open_requests
        why = None
        if limit and self.open_requests + count > limit:
            why = f"{self.open_requests} open requests (limits.max_open_requests = {limit})"
        elif asyncio.get_running_loop().time() < self._late_until:
            why = (
                f"its event loop runs late (limits.max_loop_lag_s = {self.settings.max_loop_lag_s})"
            )
        if why is not None:
            self.refused += 1
            raise Overloaded(f"tssd admits no new requests now: {why}; retry",
                             self.settings.retry_after_s)  # fmt: skip

    def admitted(self, created: int) -> None:
        self.open_requests += created

    async def _count(self) -> None:
        stmt = select(func.count()).select_from(Request).where(Request.state.in_(OPEN_STATES))
        try:
            async with self.store.engine.connect() as conn:
                self.open_requests = int((await conn.execute(stmt)).scalar_one())
        except Exception as exc:  # a count missed is retried next time
            log.warning("admission.count_failed", error=str(exc)[:200])

    async def _recount(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            await self._count()

    async def _watch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(TICK_S)
            now = loop.time()
            lag = now - before - TICK_S
            self.max_lag_s = max(self.max_lag_s, lag)
            if lag > STALL_LOG_S:
                log.warning("loop.stall", lag_s=round(lag, 3))
            limit = self.settings.max_loop_lag_s
            if limit and lag > limit:
                self._late_until = now + LAG_HOLD_S


ADMISSION: web.AppKey[Admission] = web.AppKey("admission", Admission)


def admit(request: web.Request, count: int = 1) -> Admission | None:
    """Refuse (:class:`Overloaded`) or admit *count* new requests on *request*'s app."""
    admission = request.app.get(ADMISSION)
    if admission is not None:
        admission.admit(count)
    return admission

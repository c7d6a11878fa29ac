"""Admission control: past a number of open requests, or while the event loop runs late,
new submits get ``503`` with ``Retry-After`` (``tss-hsm`` exits 72; dCache calls again).

Polls, reads and cancels are always admitted: they are how the backlog drains. The
open-request count is read from the database every ``REFRESH_S`` (in a worker thread, by
the database driver) and advanced by every admitted submit in between; the loop's lag is
measured every ``TICK_S`` and a lag above ``limits.max_loop_lag_s`` refuses submits for
the next second.

Far below the limit (under half of it) the count is read every ``FAR_REFRESH_S`` only:
it walks the index of every open request, a second of database CPU a minute at a
million pending, which the pools' calls waited behind. Between counts the figure only
grows (finished requests are subtracted by the next count), so a stale one errs on the
side of refusing; other instances' submits are counted within ``FAR_REFRESH_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import structlog
from aiohttp import web

from tssd.config.sections import LimitsSettings
from tssd.errors import TssdError
from tssd.ports.admission import OpenCount

log = structlog.get_logger()
TICK_S = 0.1
REFRESH_S = 5.0
FAR_REFRESH_S = 60.0
#: A lag above this is logged as ``loop.stall`` (the benchmark's bound).
STALL_LOG_S = 0.1
#: How long one late tick keeps submits refused.
LAG_HOLD_S = 1.0
#: At most one ``admission.refused`` line per this many seconds (with the running count).
REFUSAL_LOG_S = 10.0


class Overloaded(TssdError):
    """tssd admits no new requests now; the client retries after ``retry_after_s``."""

    exit_code = 72

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Admission:
    """The admission state one daemon's listeners share (``request.app[ADMISSION]``)."""

    def __init__(self, settings: LimitsSettings, store: OpenCount) -> None:
        self.settings = settings
        self.store = store
        #: Open requests at the last count, created since it started, and reserved by
        #: submits in flight: their sum is what admission compares with the limit.
        self._counted = 0
        self._since = 0
        self._reserved = 0
        self.max_lag_s = 0.0
        self.refused = 0
        self._logged_at = float("-inf")
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
        log.info("admission.summary", max_loop_lag_s=round(self.max_lag_s, 4),
                 refused=self.refused, open_requests=self.open_requests)  # fmt: skip

    @property
    def open_requests(self) -> int:
        return self._counted + self._since + self._reserved

    def admit(self, count: int = 1) -> None:
        """Raise :class:`Overloaded` unless *count* more requests may be submitted; else
        reserve them (concurrent submits must not all pass the same check)."""
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
            now = time.monotonic()
            if now - self._logged_at >= REFUSAL_LOG_S:
                log.warning("admission.refused", reason=why, refused=self.refused,
                            open_requests=self.open_requests)  # fmt: skip
                self._logged_at = now
            raise Overloaded(f"tssd admits no new requests now: {why}; retry",
                             self.settings.retry_after_s)  # fmt: skip
        self._reserved += count

    def settle(self, reserved: int, created: int) -> None:
        """A submit that reserved *reserved* ended having created *created*."""
        self._reserved -= reserved
        self._since += created

    async def _count(self) -> None:
        # Requests created while the count runs may be counted twice until the next count:
        # admission errs on the side of refusing, never of admitting past the limit.
        since = self._since
        try:
            self._counted = await self.store.count_open()
        except Exception as exc:  # a count missed is retried next time
            log.warning("admission.count_failed", error=str(exc)[:200])
            return
        self._since -= since

    async def _recount(self) -> None:
        counted_at = time.monotonic()
        while True:
            await asyncio.sleep(REFRESH_S)
            if self.far_below_limit() and time.monotonic() - counted_at < FAR_REFRESH_S:
                continue
            await self._count()
            counted_at = time.monotonic()

    def far_below_limit(self) -> bool:
        """Under half of ``limits.max_open_requests`` (or no limit): see the docstring."""
        limit = self.settings.max_open_requests
        return not limit or 2 * self.open_requests < limit

    async def _watch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before, cpu_before, proc_before = loop.time(), time.thread_time(), time.process_time()
            await asyncio.sleep(TICK_S)
            now = loop.time()
            lag = now - before - TICK_S
            # The loop thread's own CPU time in the window. A lag far above it was the
            # machine (other processes) or a blocking call that uses no CPU; the whole
            # process's CPU tells whether tssd's worker threads held the interpreter.
            cpu = time.thread_time() - cpu_before
            self.max_lag_s = max(self.max_lag_s, lag)
            if lag > STALL_LOG_S:
                log.warning("loop.stall", lag_s=round(lag, 3), cpu_s=round(cpu, 3),
                            process_cpu_s=round(time.process_time() - proc_before, 3))  # fmt: skip
            # Only lag tssd caused itself refuses submits: refusing because other
            # processes hold the CPU would fail dCache's calls for nothing tssd can relieve.
            limit = self.settings.max_loop_lag_s
            if limit and min(lag, cpu) > limit:
                self._late_until = now + LAG_HOLD_S


ADMISSION: web.AppKey[Admission] = web.AppKey("admission", Admission)


@dataclass
class Ticket:
    """What a submit admitted: *created* is set to the requests it really created."""

    created: int = 0


@contextmanager
def admission(request: web.Request, count: int = 1) -> Iterator[Ticket]:
    """Admit *count* new requests on *request*'s app (or raise :class:`Overloaded`); the
    reservation is settled to what was really created when the block ends."""
    state = request.app.get(ADMISSION)
    ticket = Ticket()
    if state is None:
        yield ticket
        return
    state.admit(count)
    try:
        yield ticket
    finally:
        state.settle(count, ticket.created)

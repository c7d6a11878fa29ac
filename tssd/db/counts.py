"""Request counts per kind, queue and state for ``tssctl status``, ``queues`` and gauges.

Counting is a walk of ``requests`` whatever the index: at a million pending requests one
``GROUP BY`` costs about a second of database time. So a small table is counted on every
call (exact, and what a test or a quiet site sees), and a large one at most every
``max_age_s`` seconds, in the background: a caller gets the last figures at once, with
their age (``counted_at``), never waits for a count and never starts a second one.

On a large table the open requests (queued, active: the queue, which changes by the
second) are counted every ``max_age_s`` from the state index, and the finished ones (the
history, which only grows by what finishes) at most every ``finished_max_age_s``: with
ten million finished requests a recount of the whole table every half-minute was seconds
of a two-core server's CPU, for figures that had barely moved.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from tssd.db.models import OPEN_STATES, Request
from tssd.db.plans import NO_SEQSCAN

#: Below this many requests a count is cheap and always fresh.
EXACT_BELOW = 50_000
_GROUPED = select(
    Request.kind,
    Request.queue,
    Request.state,
    func.count(),
    func.coalesce(func.sum(Request.size), 0),
    func.min(Request.created_at),
).group_by(Request.kind, Request.queue, Request.state)
_OPEN_GROUPED = _GROUPED.where(Request.state.in_(OPEN_STATES))
_OPEN = select(func.count()).select_from(Request).where(Request.state.in_(OPEN_STATES))


async def count_open(engine: AsyncEngine) -> int:
    """The number of open (queued or active) requests, counted now: admission's figure
    (tssd.api.admission), which must not be older than its own refresh period."""
    async with engine.connect() as conn:
        await _from_the_index(conn, conn.dialect.name)
        return int((await conn.execute(_OPEN)).scalar_one())


async def _from_the_index(conn: AsyncConnection | AsyncSession, dialect: str) -> None:
    """PostgreSQL: the open requests read from the state index for the rest of the
    transaction. With statistics that know a tenth of the table is open, the planner
    scans the whole table, history included (1.3-1.8 s at 11 M rows, 1 M open, against
    1.2 s from the index), and the cost of a count would grow with the history."""
    if dialect == "postgresql":
        await conn.execute(NO_SEQSCAN)


@dataclass(frozen=True)
class Group:
    """The requests of one kind, queue and state."""

    kind: str
    queue: str
    state: str
    count: int
    bytes: int
    oldest: datetime | None


@dataclass
class Counts:
    """The last count, shared by every caller; see the module docstring."""

    sessions: async_sessionmaker[AsyncSession]
    max_age_s: float = 30.0
    exact_below: int = EXACT_BELOW
    finished_max_age_s: float = 600.0
    groups: list[Group] = field(default_factory=list)
    counted_at: float = float("-inf")
    #: When the finished requests were last counted (the open ones: ``counted_at``).
    finished_at: float = float("-inf")
    #: Wall-clock seconds the last count took (``tssd_request_count_seconds``).
    took_s: float = 0.0
    _running: asyncio.Task[list[Group]] | None = None

    @property
    def total(self) -> int:
        return sum(g.count for g in self.groups)

    async def get(self) -> list[Group]:
        """Current figures: counted now when the table is small, else the last count."""
        if self.counted_at == float("-inf"):
            # The first count is shared: at start-up the status, the gauges and admission
            # all ask before any figure exists, and on a large table each would scan it.
            await asyncio.shield(self._start())
            if self.total >= self.exact_below:
                return self.groups
        if self.total < self.exact_below:
            return await self._count()
        if time.monotonic() - self.counted_at >= self.max_age_s:
            self._start()
        return self.groups

    def _start(self) -> asyncio.Task[list[Group]]:
        """The count under way, or a new one in the background."""
        if self._running is None:
            self._running = asyncio.create_task(self._count(), name="request-counts")
            self._running.add_done_callback(self._done)
        return self._running

    def age_s(self) -> float:
        return max(0.0, time.monotonic() - self.counted_at)

    async def _count(self) -> list[Group]:
        started = time.monotonic()
        small = self.counted_at == float("-inf") or self.total < self.exact_below
        every = small or started - self.finished_at >= self.finished_max_age_s
        async with self.sessions() as session:
            if not every:
                await _from_the_index(session, session.get_bind().dialect.name)
            rows = (await session.execute(_GROUPED if every else _OPEN_GROUPED)).all()
        counted = [Group(k, q, s, n, int(b or 0), o) for k, q, s, n, b, o in rows]
        if not every:  # the finished groups of the last whole count stand
            counted += [g for g in self.groups if g.state not in OPEN_STATES]
        self.groups = counted
        self.counted_at = time.monotonic()
        if every:
            self.finished_at = self.counted_at
        self.took_s = self.counted_at - started
        return self.groups

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running = None
        if not task.cancelled():
            task.exception()  # retrieved: a failed count is retried on the next call

    async def close(self) -> None:
        task, self._running = self._running, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

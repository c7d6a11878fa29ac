"""What the scheduler reads from the database besides requests, cached between full passes:
queue settings (``tssctl queues set`` writes them), mount history for the daily budget,
and the pending recalls that fill the planner.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import Kind, Mount, QueueRow, Request, State
from tssd.scheduler.cost import QueuePolicy
from tssd.scheduler.planner import Entry

DAY_S = 86400.0
#: Size assumed for a recall whose size nobody told us yet (for cost estimates only).
DEFAULT_SIZE = 2 * 10**9


async def load_queues(sessions: async_sessionmaker[AsyncSession]) -> dict[str, QueuePolicy]:
    async with sessions() as session:
        rows = (await session.scalars(select(QueueRow))).all()
    return {
        q.name: QueuePolicy(
            priority=q.priority or 0,
            max_drives=q.max_drives,
            paused=q.paused,
            latency_target_s=q.latency_target_s,
        )
        for q in rows
    }


async def paused_queues(sessions: async_sessionmaker[AsyncSession]) -> frozenset[str]:
    """Queues an operator paused: they start neither recalls nor migrations."""
    async with sessions() as session:
        return frozenset(await session.scalars(select(QueueRow.name).where(QueueRow.paused)))


#: Every queued, located recall: the planner's full load reads the pending set by design
#: (at start-up and every ``resync_s``), the one statement that may read most of the table.
PENDING = select(
    Request.id, Request.volume, Request.position, Request.size, Request.priority,
    Request.queue, Request.created_at,
).where(
    Request.kind == Kind.RECALL, Request.state == State.QUEUED, Request.volume.is_not(None)
)  # fmt: skip


async def load_pending(
    sessions: async_sessionmaker[AsyncSession], now: float, wall: datetime
) -> list[Entry]:
    """Every queued, located recall, as planner entries (arrival from ``created_at``)."""
    entries = []
    async with sessions() as session:
        # On the session's connection, not through the ORM: its row handling cost three
        # times the CPU of the load itself (16 s for a million recalls; issue 22).
        conn = await session.connection()
        result = await conn.stream(PENDING.execution_options(yield_per=10_000))
        async for part in result.partitions():
            for rid, volume, position, size, priority, queue, created in part:
                age = (wall - _aware(created)).total_seconds() if created is not None else 0.0
                entries.append(
                    Entry(rid, volume or "", position or 0, size or DEFAULT_SIZE,
                          priority or 0, queue or "default", now - max(0.0, age))
                )  # fmt: skip
    return entries


class MountLedger:
    """Mount times per volume over the last day (the per-tape mount budget)."""

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}

    def record(self, volume: str, at: float) -> None:
        self._times.setdefault(volume, deque()).append(at)

    def count(self, volume: str, now: float) -> int:
        times = self._times.get(volume)
        if not times:
            return 0
        while times and times[0] <= now - DAY_S:
            times.popleft()
        return len(times)

    def free_at(self, volume: str, now: float, budget: int) -> float:
        """When the budget lets *volume* be mounted again."""
        times = self._times.get(volume)
        if not times or self.count(volume, now) < budget:
            return now
        return times[len(times) - budget] + DAY_S

    async def load(
        self, sessions: async_sessionmaker[AsyncSession], now: float, wall: datetime
    ) -> None:
        """Mounts of the last day recorded by earlier runs."""
        since = wall - timedelta(seconds=DAY_S)
        stmt = select(Mount.volume, Mount.requested_at).where(Mount.requested_at >= since)
        async with sessions() as session:
            rows = (await session.execute(stmt.order_by(Mount.requested_at))).all()
        for volume, at in rows:
            self.record(volume, now - (wall - _aware(at)).total_seconds())


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

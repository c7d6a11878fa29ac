"""Queue settings rows (``tssctl queues set`` writes them; the scheduler and API read them)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import QueueRow
from tssd.ports.scheduling import QueueRecord


class QueueStore:
    """Reads of the ``queues`` table, each in a transaction of its own
    (:class:`tssd.ports.scheduling.QueueSettings`)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def rows(self) -> list[QueueRecord]:
        """Every configured queue, in name order."""
        async with self.sessions() as session:
            rows = (await session.scalars(select(QueueRow).order_by(QueueRow.name))).all()
        return [
            QueueRecord(q.name, q.priority, q.max_drives, q.paused, q.latency_target_s)
            for q in rows
        ]

    async def paused(self) -> frozenset[str]:
        """Names of the queues an operator paused."""
        async with self.sessions() as session:
            return frozenset(await session.scalars(select(QueueRow.name).where(QueueRow.paused)))


async def _queue_rows(sessions: async_sessionmaker[AsyncSession]) -> list[dict[str, Any]]:
    async with sessions() as session:
        rows = (await session.scalars(select(QueueRow))).all()
    return [
        {
            "name": q.name,
            "priority": q.priority,
            "max_drives": q.max_drives,
            "paused": q.paused,
            "latency_target_s": q.latency_target_s,
        }
        for q in rows
    ]

"""Queries of the library-at-a-glance views (``GET /v1/top`` and the ``/status`` page).

Each query is bounded: by the number of drives, by a row limit, or by an index prefix,
so that a view refreshed every second or two costs little however long the history.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import Drive, Mount, Request


class GlanceStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def drives(self) -> list[Drive]:
        """Every drive of every instance sharing the database, by name."""
        async with self.sessions() as session:
            return list((await session.scalars(select(Drive).order_by(Drive.name))).all())

    async def open_mounts(self) -> dict[str, Mount]:
        """The mount each drive holds now, by drive (one row per drive at most)."""
        stmt = select(Mount).where(Mount.dismounted_at.is_(None)).order_by(Mount.id)
        async with self.sessions() as session:
            return {m.drive: m for m in (await session.scalars(stmt)).all()}

    async def active_per_drive(self) -> dict[str, tuple[int, int]]:
        """Requests claimed by each drive and not finished yet: (count, bytes)."""
        stmt = (
            select(Request.drive, func.count(), func.coalesce(func.sum(Request.size), 0))
            .where(Request.state == "active", Request.drive.is_not(None))
            .group_by(Request.drive)
        )
        async with self.sessions() as session:
            rows = (await session.execute(stmt)).all()
        return {d: (n, int(b or 0)) for d, n, b in rows if d is not None}

    async def last_mounts(self, limit: int) -> list[Mount]:
        """The newest *limit* mounts, newest first."""
        stmt = select(Mount).order_by(Mount.id.desc()).limit(limit)
        async with self.sessions() as session:
            return list((await session.scalars(stmt)).all())

    async def mounts_since(self, since: datetime, limit: int) -> tuple[list[Mount], bool]:
        """Mounts requested since *since* or still open, oldest first, at most *limit*
        (the newest); whether older ones were left out."""
        stmt = (
            select(Mount)
            .where((Mount.requested_at >= since) | Mount.dismounted_at.is_(None))
            .order_by(Mount.id.desc())
            .limit(limit + 1)
        )
        async with self.sessions() as session:
            rows = list((await session.scalars(stmt)).all())
        return list(reversed(rows[:limit])), len(rows) > limit

    async def wear(self, since: datetime, limit: int) -> list[tuple[str, int]]:
        """The tapes mounted most often since *since*: (volume, mounts), most first."""
        count = func.count().label("n")
        stmt = (
            select(Mount.volume, count)
            .where(Mount.requested_at >= since)
            .group_by(Mount.volume)
            .order_by(count.desc(), Mount.volume)
            .limit(limit)
        )
        async with self.sessions() as session:
            return [(v, n) for v, n in (await session.execute(stmt)).all()]

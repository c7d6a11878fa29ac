"""Queries of the library-at-a-glance views (``GET /v1/top`` and the ``/status`` page):
:class:`tssd.ports.reports.Glance` in SQL.

Each query is bounded: by the number of drives, by a row limit on the primary key, or
by an index prefix (open requests), so that a view refreshed every second or two costs
little however long the history.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd import domain
from tssd.db.models import Drive, Mount, Request
from tssd.db.views import drive_record, mount_record

#: Newest mounts searched for the ones still open.
OPEN_SCAN = 1000


class GlanceStore:
    """:class:`tssd.ports.reports.Glance` on the database shared by every instance."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def drives(self) -> list[domain.Drive]:
        """Every drive of every instance sharing the database, by name."""
        async with self.sessions() as session:
            rows = (await session.scalars(select(Drive).order_by(Drive.name))).all()
        return [drive_record(row) for row in rows]

    async def open_mounts(self) -> dict[str, domain.Mount]:
        """The mount each drive holds now, by drive, among the newest :data:`OPEN_SCAN`
        mounts (a tape held while a thousand others were mounted is not looked for)."""
        return open_by_drive(await self.last_mounts(OPEN_SCAN))

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

    async def last_mounts(self, limit: int) -> list[domain.Mount]:
        """The newest *limit* mounts, newest first."""
        stmt = select(Mount).order_by(Mount.id.desc()).limit(limit)
        async with self.sessions() as session:
            rows = (await session.scalars(stmt)).all()
        return [mount_record(row) for row in rows]

    async def mounts_since(self, since: datetime, limit: int) -> tuple[list[domain.Mount], bool]:
        """Mounts requested since *since* or still open, oldest first, at most *limit*
        (the newest); whether older ones were left out.

        Read newest first by primary key and cut at *since* (ids grow with time): the
        cost is *limit* rows at most, whatever the length of the history.
        """
        return window(await self.last_mounts(limit + 1), since, limit)


def open_by_drive(newest: list[domain.Mount]) -> dict[str, domain.Mount]:
    """The open mounts among *newest* (newest first), by drive (the newest if several)."""
    return {m.drive: m for m in reversed(newest) if m.dismounted_at is None}


def window(
    newest: list[domain.Mount], since: datetime, limit: int
) -> tuple[list[domain.Mount], bool]:
    """Of the *limit* + 1 *newest* mounts (newest first), those requested since *since*
    or still open, oldest first, at most *limit*; whether more were."""
    inside = [m for m in newest if m.dismounted_at is None or m.requested_at >= since]
    return list(reversed(inside[:limit])), len(inside) > limit

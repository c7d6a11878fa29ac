"""Which cartridges this instance may mount: the drive row is the claim.

Writing a volume into one's own drive row before the mount fails on the unique
``drives.volume`` while any other drive, of any instance, holds or is loading it, so no
two instances can mount one cartridge. Volumes in other instances' drives are remembered
so the scheduler does not pick them (one query per heartbeat, not per pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import structlog
from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import Drive, utcnow
from tssd.errors import Conflict

log = structlog.get_logger()


class VolumeTaken(Conflict):
    """The cartridge is in, or on its way into, a drive of another instance."""


class VolumeClaims(Protocol):
    """What the drive manager and the scheduler ask before using a cartridge."""

    def mountable(self, volume: str) -> bool:
        """False while *volume* is known to be in another instance's drive."""
        ...

    async def claim(self, drive: str, volume: str) -> None:
        """Reserve *volume* for *drive* before mounting it; raise :class:`VolumeTaken`."""
        ...

    def scope(self, column: Any) -> list[ColumnElement[bool]]:
        """Conditions restricting drive or mount rows (by drive name) to this instance."""
        ...


class LocalClaims:
    """A single instance: its in-memory view and the unique drive volume suffice."""

    def mountable(self, volume: str) -> bool:
        return True

    async def claim(self, drive: str, volume: str) -> None:
        return None

    def scope(self, column: Any) -> list[ColumnElement[bool]]:
        return []


class SharedClaims:
    """Claims of one instance among several sharing the database."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], instance: str) -> None:
        self.sessions = sessions
        self.instance = instance
        self.drives: frozenset[str] = frozenset()
        self.foreign: set[str] = set()

    def own(self, names: Iterable[str]) -> None:
        self.drives = frozenset(names)

    def mountable(self, volume: str) -> bool:
        return volume not in self.foreign

    def scope(self, column: Any) -> list[ColumnElement[bool]]:
        return [column.in_(sorted(self.drives))]

    async def claim(self, drive: str, volume: str) -> None:
        stmt = (
            update(Drive)
            .where(Drive.name == drive)
            .values(volume=volume, state="busy", instance=self.instance, updated_at=utcnow())
        )
        try:
            async with self.sessions.begin() as session:
                await session.execute(stmt)
        except IntegrityError as exc:
            self.foreign.add(volume)
            log.info("cluster.volume_taken", drive=drive, volume=volume)
            raise VolumeTaken(f"volume {volume} is in a drive of another instance") from exc

    async def refresh(self) -> None:
        """Reload the volumes held by drives that are not this instance's."""
        stmt = select(Drive.volume).where(
            Drive.volume.is_not(None),
            Drive.name.not_in(sorted(self.drives)),
            or_(Drive.instance.is_(None), Drive.instance != self.instance),
        )
        async with self.sessions() as session:
            volumes = (await session.scalars(stmt)).all()
        self.foreign = {v for v in volumes if v is not None}

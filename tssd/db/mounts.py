"""Drive, mount and tape rows: what each drive holds and the durable mount history.

``drives.volume`` is unique, so a cartridge is recorded in at most one drive even if a
daemon's in-memory view were wrong. Every method is one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import Drive, Mount, Tape, utcnow

#: Conditions restricting drive or mount rows (by their drive-name column) to this
#: instance's drives (:meth:`tssd.cluster.claims.VolumeClaims.scope`).
Scope = Callable[[Any], list[ColumnElement[bool]]]


class DriveInfo(Protocol):
    """A drive as the backend reports it (:class:`tssd.backends.base.DriveInfo`)."""

    @property
    def name(self) -> str: ...

    @property
    def volume(self) -> str | None: ...


class MountStore:
    """Writes of the scheduler's drive bookkeeping (:mod:`tssd.scheduler.drives`)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def reset_drives(self, infos: Sequence[DriveInfo], scope: Scope) -> dict[str, bool]:
        """At start-up: close the mounts a crash left open, record what each drive holds
        now (a row for a drive never seen before); return whether each drive is enabled."""
        now = utcnow()
        async with self.sessions.begin() as session:
            # Only this instance's drives and mounts: others sharing the database are live.
            own_mounts = scope(Mount.drive)
            await session.execute(
                update(Mount)
                .where(Mount.dismounted_at.is_(None), *own_mounts)
                .values(dismounted_at=now)
            )
            enabled = {d.name: d.enabled for d in (await session.scalars(select(Drive))).all()}
            own_drives = scope(Drive.name)
            await session.execute(
                update(Drive).where(*own_drives).values(volume=None, state="empty")
            )
            for info in infos:
                row = await session.get(Drive, info.name)
                if row is None:
                    session.add(Drive(name=info.name, enabled=True, state="empty"))
            await session.flush()
            for info in infos:
                await session.execute(
                    update(Drive)
                    .where(Drive.name == info.name)
                    .values(volume=info.volume, state="mounted" if info.volume else "empty")
                )
        return enabled

    async def open_mount(self, drive: str, volume: str, purpose: str) -> int:
        """Record a mount requested now; return its id."""
        async with self.sessions.begin() as session:
            row = Mount(drive=drive, volume=volume, purpose=purpose, requested_at=utcnow())
            session.add(row)
            await session.flush()
            return row.id

    async def mounted(self, drive: str, volume: str, mount_id: int) -> None:
        """The tape is ready in the drive: the mount, the drive and the tape's count."""
        now = utcnow()
        async with self.sessions.begin() as session:
            await session.execute(update(Mount).where(Mount.id == mount_id).values(ready_at=now))
            await session.execute(
                update(Drive)
                .where(Drive.name == drive)
                .values(volume=volume, state="mounted", updated_at=now)
            )
            tape = await session.get(Tape, volume)
            if tape is None:
                session.add(Tape(volume=volume, mounts=1, last_mounted_at=now))
            else:
                tape.mounts += 1
                tape.last_mounted_at = now

    async def mount_failed(self, drive: str, mount_id: int) -> None:
        """The tape never became ready: close its mount row and empty the drive."""
        now = utcnow()
        async with self.sessions.begin() as session:
            await session.execute(
                update(Mount).where(Mount.id == mount_id).values(dismounted_at=now)
            )
            await session.execute(
                update(Drive)
                .where(Drive.name == drive)
                .values(volume=None, state="empty", updated_at=now)
            )

    async def save_stats(self, mount_id: int, files: int, nbytes: int, transfer_s: float) -> None:
        """The running mount's counters (``tssctl mounts`` reads them)."""
        async with self.sessions.begin() as session:
            await session.execute(
                update(Mount)
                .where(Mount.id == mount_id)
                .values(files=files, bytes=nbytes, transfer_s=transfer_s)
            )

    async def close_mount(
        self,
        drive: str,
        mount_id: int | None,
        at: datetime,
        *,
        files: int,
        nbytes: int,
        transfer_s: float,
    ) -> None:
        """The tape left *drive* at *at*: close its mount (final counters), empty the drive."""
        async with self.sessions.begin() as session:
            if mount_id is not None:
                await session.execute(
                    update(Mount)
                    .where(Mount.id == mount_id)
                    .values(
                        dismounted_at=at,
                        files=files,
                        bytes=nbytes,
                        transfer_s=transfer_s,
                    )
                )
            await session.execute(
                update(Drive)
                .where(Drive.name == drive)
                .values(volume=None, state="empty", updated_at=at)
            )

    async def requested_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """(volume, requested_at) of the mounts requested since *since*, oldest first."""
        stmt = select(Mount.volume, Mount.requested_at).where(Mount.requested_at >= since)
        async with self.sessions() as session:
            rows = (await session.execute(stmt.order_by(Mount.requested_at))).all()
        return [(volume, at) for volume, at in rows]

"""Drive, mount and tape rows: what each drive holds and the durable mount history.

``drives.volume`` is unique, so a cartridge is recorded in at most one drive even if a
daemon's in-memory view were wrong. Every method is one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol, cast

from sqlalchemy import ColumnElement, Connection, Table, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.engine import in_transaction
from tssd.db.models import Drive, Mount, Tape, utcnow
from tssd.domain import Kind

#: The drives whose rows are this instance's, None for every drive
#: (:attr:`tssd.cluster.claims.VolumeClaims.scope`).
Scope = Collection[str] | None


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
        self._engine = sessions.kw["bind"]

    async def reset_drives(self, infos: Sequence[DriveInfo], scope: Scope) -> dict[str, bool]:
        """At start-up: close the mounts a crash left open, record what each drive holds
        now (a row for a drive never seen before); return whether each drive is enabled."""
        now = utcnow()
        async with self.sessions.begin() as session:
            # Only this instance's drives and mounts: others sharing the database are live.
            own_mounts = _within(Mount.drive, scope)
            await session.execute(
                update(Mount)
                .where(Mount.dismounted_at.is_(None), *own_mounts)
                .values(dismounted_at=now)
            )
            enabled = {d.name: d.enabled for d in (await session.scalars(select(Drive))).all()}
            own_drives = _within(Drive.name, scope)
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

    async def open_mount(self, drive: str, volume: str, purpose: Kind) -> int:
        """Record a mount requested now; return its id."""
        row = {"b_drive": drive, "b_volume": volume, "b_purpose": purpose, "b_at": utcnow()}
        return await in_transaction(self._engine, _open_mount, row)

    async def mounted(self, drive: str, volume: str, mount_id: int) -> None:
        """The tape is ready in the drive: the mount, the drive and the tape's count."""
        await in_transaction(self._engine, _mounted, drive, volume, mount_id, utcnow())

    async def mount_failed(self, drive: str, mount_id: int) -> None:
        """The tape never became ready: close its mount row and empty the drive."""
        now = utcnow()
        closed = {"b_mid": mount_id, "b_at": now, "b_files": None}
        await in_transaction(self._engine, _close, closed, _emptied(drive, now))

    async def save_stats(self, mount_id: int, files: int, nbytes: int, transfer_s: float) -> None:
        """The running mount's counters (``tssctl mounts`` reads them)."""
        stats = {"b_mid": mount_id, "b_files": files, "b_bytes": nbytes, "b_transfer": transfer_s}
        await in_transaction(self._engine, _execute, _STATS, stats)

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
        closed = None
        if mount_id is not None:
            closed = {
                "b_mid": mount_id, "b_at": at, "b_files": files, "b_bytes": nbytes,
                "b_transfer": transfer_s,
            }  # fmt: skip
        await in_transaction(self._engine, _close, closed, _emptied(drive, at))

    async def requested_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """(volume, requested_at) of the mounts requested since *since*, oldest first."""
        stmt = select(Mount.volume, Mount.requested_at).where(Mount.requested_at >= since)
        async with self.sessions() as session:
            rows = (await session.execute(stmt.order_by(Mount.requested_at))).all()
        return [(volume, at) for volume, at in rows]


def _within(column: Any, scope: Scope) -> list[ColumnElement[bool]]:
    """The condition keeping the rows of *column* (a drive name) within *scope*."""
    return [] if scope is None else [column.in_(sorted(scope))]


# Core statements, built once: a fifo simulation mounts a tape for every other file, and
# building ORM statements and sessions cost more than running them (issue 18 point 7).
_MOUNTS = cast(Table, Mount.__table__)
_DRIVES = cast(Table, Drive.__table__)
_TAPES = cast(Table, Tape.__table__)


def _mount_update(**columns: str) -> Any:
    """UPDATE of the mount ``b_mid``: each column set to the parameter named for it."""
    values: dict[str, Any] = {column: bindparam(param) for column, param in columns.items()}
    return _MOUNTS.update().where(_MOUNTS.c.id == bindparam("b_mid")).values(values)


_OPEN = (
    _MOUNTS.insert()
    .values(
        drive=bindparam("b_drive"), volume=bindparam("b_volume"),
        purpose=bindparam("b_purpose"), requested_at=bindparam("b_at"),
    )
    .returning(_MOUNTS.c.id)
)  # fmt: skip
_STATS = _mount_update(files="b_files", bytes="b_bytes", transfer_s="b_transfer")
_READY = _mount_update(ready_at="b_at")
_CLOSE = _mount_update(
    dismounted_at="b_at", files="b_files", bytes="b_bytes", transfer_s="b_transfer"
)
_CLOSE_ONLY = _mount_update(dismounted_at="b_at")
_DRIVE = (
    _DRIVES.update()
    .where(_DRIVES.c.name == bindparam("b_name"))
    .values(volume=bindparam("b_volume"), state=bindparam("b_state"), updated_at=bindparam("b_at"))
)
_TAPE_COUNT = (
    _TAPES.update()
    .where(_TAPES.c.volume == bindparam("b_volume"))
    .values(mounts=_TAPES.c.mounts + 1, last_mounted_at=bindparam("b_at"))
)
_TAPE_FIRST = _TAPES.insert().values(
    volume=bindparam("b_volume"), state="ok", mounts=1, last_mounted_at=bindparam("b_at")
)


def _execute(conn: Connection, stmt: Any, params: dict[str, Any]) -> None:
    conn.execute(stmt, params)


def _open_mount(conn: Connection, row: dict[str, Any]) -> int:
    return int(conn.execute(_OPEN, row).scalar_one())


def _mounted(conn: Connection, drive: str, volume: str, mount_id: int, now: datetime) -> None:
    conn.execute(_READY, {"b_mid": mount_id, "b_at": now})
    conn.execute(_DRIVE, {"b_name": drive, "b_volume": volume, "b_state": "mounted", "b_at": now})
    tape = {"b_volume": volume, "b_at": now}
    if not conn.execute(_TAPE_COUNT, tape).rowcount:
        conn.execute(_TAPE_FIRST, tape)


def _emptied(drive: str, at: datetime) -> dict[str, Any]:
    return {"b_name": drive, "b_volume": None, "b_state": "empty", "b_at": at}


def _close(conn: Connection, closed: dict[str, Any] | None, drive: dict[str, Any]) -> None:
    """Close a mount row (with its final counters unless ``b_files`` is None), empty the
    drive's row."""
    if closed is not None:
        conn.execute(_CLOSE_ONLY if closed["b_files"] is None else _CLOSE, closed)
    conn.execute(_DRIVE, drive)

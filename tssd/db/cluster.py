"""The cluster's tables: ``instances`` and the drive rows that are the volume claims.

:class:`SqlCluster` is the :class:`~tssd.ports.cluster.ClusterBook` of a database.
Heartbeats are written and compared in the database server's time (``now()``), so the
clocks of the tape servers never matter for deciding that an instance is dead. Each
method is one transaction (or one read); :mod:`tssd.cluster` decides when to call them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from tssd.db.engine import Sessions, is_postgres
from tssd.db.listen import QuietSignals, WorkListener
from tssd.db.models import Drive, Instance, Mount, Request, State, utcnow
from tssd.db.views import drive_record, instance_record
from tssd.errors import ConfigError
from tssd.ports.cluster import (
    LIVE,
    REAPED,
    STOPPED,
    ClusterSignals,
    Member,
    Orphan,
    Released,
    Roster,
)

__all__ = ["LIVE", "REAPED", "STOPPED", "SqlCluster"]


class SqlCluster:
    """The cluster's book in the database of *sessions* (see the module docstring)."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.engine: AsyncEngine = sessions.kw["bind"]

    # -- instances ---------------------------------------------------------------------

    async def register(
        self,
        instance: str,
        host: str,
        pid: int,
        lease: timedelta,
        drives: Sequence[str],
        *,
        alive: Callable[[int], bool],
    ) -> None:
        async with self.sessions.begin() as session:
            await _check_duplicate(session, instance, host, pid, lease, alive)
            await _check_drives(session, instance, lease, drives)
            row = await session.get(Instance, instance)
            if row is None:
                session.add(Instance(id=instance, host=host, pid=pid))
                await session.flush()
            await session.execute(
                update(Instance)
                .where(Instance.id == instance)
                .values(host=host, pid=pid, state=LIVE,
                        started_at=func.now(), heartbeat_at=func.now())
            )  # fmt: skip
            for name in drives:
                if await session.get(Drive, name) is None:
                    session.add(Drive(name=name, enabled=True, state="empty"))
            await session.flush()
            await session.execute(
                update(Drive).where(Drive.name.in_(list(drives))).values(instance=instance)
            )

    async def renew(self, instance: str) -> bool:
        stmt = (
            update(Instance)
            .where(Instance.id == instance, Instance.state == LIVE)
            .values(heartbeat_at=func.now())
        )
        async with self.sessions.begin() as session:
            return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def others_live(self, instance: str, lease: timedelta) -> bool:
        stmt = select(func.count()).where(
            Instance.id != instance,
            Instance.state == LIVE,
            Instance.heartbeat_at >= func.now() - lease,
        )
        async with self.sessions() as session:
            return bool(await session.scalar(stmt))

    async def mark_stopped(self, instance: str) -> None:
        stmt = (
            update(Instance)
            .where(Instance.id == instance, Instance.state == LIVE)
            .values(state=STOPPED, heartbeat_at=func.now())
        )
        async with self.sessions.begin() as session:
            await session.execute(stmt)

    async def roster(self) -> Roster:
        age = func.extract("epoch", func.now() - Instance.heartbeat_at)
        async with self.sessions() as session:
            rows = (await session.execute(select(Instance, age).order_by(Instance.id))).all()
            drives = (await session.scalars(select(Drive).order_by(Drive.name))).all()
        members = tuple(Member(instance_record(i), float(seconds)) for i, seconds in rows)
        return Roster(members, tuple(drive_record(d) for d in drives))

    # -- volume claims -----------------------------------------------------------------

    async def take_volume(self, drive: str, volume: str, instance: str) -> bool:
        stmt = (
            update(Drive)
            .where(Drive.name == drive)
            .values(volume=volume, state="busy", instance=instance, updated_at=utcnow())
        )
        try:
            async with self.sessions.begin() as session:
                await session.execute(stmt)
        except IntegrityError:  # the unique drives.volume: another drive holds it
            return False
        return True

    async def foreign_volumes(self, own: Iterable[str], instance: str) -> set[str]:
        stmt = select(Drive.volume).where(
            Drive.volume.is_not(None),
            Drive.name.not_in(sorted(own)),
            or_(Drive.instance.is_(None), Drive.instance != instance),
        )
        async with self.sessions() as session:
            volumes = (await session.scalars(stmt)).all()
        return {v for v in volumes if v is not None}

    # -- reaping -----------------------------------------------------------------------

    async def release_expired(self, instance: str, lease: timedelta) -> Released:
        """One transaction that locks the expired instances' rows (``SKIP LOCKED``)."""
        expired = (
            select(Instance.id)
            .where(
                Instance.state == LIVE,
                Instance.id != instance,
                Instance.heartbeat_at < func.now() - lease,
            )
            .with_for_update(skip_locked=True)
        )
        now = utcnow()
        async with self.sessions.begin() as session:
            dead = list((await session.scalars(expired)).all())
            if not dead:
                return Released()
            await session.execute(
                update(Instance).where(Instance.id.in_(dead)).values(state=REAPED)
            )
            drives = select(Drive.name).where(Drive.instance.in_(dead)).scalar_subquery()
            closed = await session.execute(
                update(Mount)
                .where(Mount.drive.in_(drives), Mount.dismounted_at.is_(None))
                .values(dismounted_at=now)
                .returning(Mount.drive, Mount.volume)
            )
            released = tuple((d, v) for d, v in closed.all())
            await session.execute(
                update(Drive)
                .where(Drive.instance.in_(dead))
                .values(volume=None, state="empty", updated_at=now)
            )
        return Released(tuple(dead), released)

    async def orphaned_active(self, instance: str) -> list[Orphan]:
        gone = select(Instance.id).where(Instance.state != LIVE, Instance.id != instance)
        stmt = select(Request.id, Request.instance).where(
            Request.state == State.ACTIVE, Request.instance.in_(gone.scalar_subquery())
        )
        async with self.sessions() as session:
            return [Orphan(i, owner) for i, owner in (await session.execute(stmt)).all()]

    def signals(self, on_done: Callable[[int], None]) -> ClusterSignals:
        """``LISTEN`` on PostgreSQL; SQLite has one writer, this daemon: quiet."""
        if is_postgres(self.engine):
            return WorkListener(self.engine, on_done=on_done)
        return QuietSignals()


async def _check_duplicate(
    session: AsyncSession,
    instance: str,
    host: str,
    pid: int,
    lease: timedelta,
    alive: Callable[[int], bool],
) -> None:
    row = await _fresh(session, lease, Instance.id == instance)
    if row is None:
        return
    # The same host with a dead pid is this instance restarting after a crash.
    other_process = row.pid != pid and alive(row.pid)
    if row.host != host or other_process:
        raise ConfigError(
            f"cluster.instance {instance!r} is live on {row.host} (pid {row.pid}): "
            "give every instance its own id"
        )


async def _check_drives(
    session: AsyncSession, instance: str, lease: timedelta, drives: Sequence[str]
) -> None:
    stmt = select(Drive.name, Drive.instance).where(
        Drive.name.in_(list(drives)), Drive.instance != instance
    )
    for name, owner in (await session.execute(stmt)).all():
        if owner is not None and await _fresh(session, lease, Instance.id == owner):
            raise ConfigError(
                f"drive {name} belongs to live instance {owner}: give every instance "
                "its own drive names (sim.drive_prefix, scsi.drives)"
            )


async def _fresh(session: AsyncSession, lease: timedelta, where: Any) -> Instance | None:
    stmt = select(Instance).where(
        where, Instance.state == LIVE, Instance.heartbeat_at >= func.now() - lease
    )
    return (await session.scalars(stmt)).first()

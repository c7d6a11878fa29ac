"""The cluster's tables: ``instances`` and the drive rows that are the volume claims.

Heartbeats are written and compared in the database server's time (``now()``), so the
clocks of the tape servers never matter for deciding that an instance is dead. Each
function is one transaction (or one read); :mod:`tssd.cluster` decides when to call them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from tssd import domain
from tssd.db.engine import Sessions
from tssd.db.models import Drive, Instance, Mount, Request, State, utcnow
from tssd.db.views import drive_record, instance_record
from tssd.errors import ConfigError

LIVE, STOPPED, REAPED = "live", "stopped", "reaped"


# -- instances -------------------------------------------------------------------------


async def register_instance(
    sessions: Sessions,
    instance: str,
    host: str,
    pid: int,
    lease: timedelta,
    drives: Sequence[str],
    *,
    alive: Callable[[int], bool],
) -> None:
    """Make *instance* live and give it the rows of *drives*; refuse a duplicate.

    *alive* says whether a pid of this host runs (a live row of the same host with a
    dead pid is this instance restarting after a crash).
    """
    async with sessions.begin() as session:
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


async def renew_heartbeat(sessions: Sessions, instance: str) -> bool:
    """Renew the heartbeat of a live *instance*; False if it was reaped meanwhile."""
    stmt = (
        update(Instance)
        .where(Instance.id == instance, Instance.state == LIVE)
        .values(heartbeat_at=func.now())
    )
    async with sessions.begin() as session:
        return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def others_live(sessions: Sessions, instance: str, lease: timedelta) -> bool:
    """Whether an instance other than *instance* renewed its lease within *lease*."""
    stmt = select(func.count()).where(
        Instance.id != instance,
        Instance.state == LIVE,
        Instance.heartbeat_at >= func.now() - lease,
    )
    async with sessions() as session:
        return bool(await session.scalar(stmt))


async def mark_stopped(sessions: Sessions, instance: str) -> None:
    """A clean stop of *instance*: nothing of it is left to reap."""
    stmt = (
        update(Instance)
        .where(Instance.id == instance, Instance.state == LIVE)
        .values(state=STOPPED, heartbeat_at=func.now())
    )
    async with sessions.begin() as session:
        await session.execute(stmt)


async def instances_and_drives(
    sessions: Sessions,
) -> tuple[list[tuple[domain.Instance, float]], list[domain.Drive]]:
    """Every instance with its heartbeat age in seconds, and every drive, by name."""
    age = func.extract("epoch", func.now() - Instance.heartbeat_at)
    async with sessions() as session:
        rows = (await session.execute(select(Instance, age).order_by(Instance.id))).all()
        drives = (await session.scalars(select(Drive).order_by(Drive.name))).all()
    instances = [(instance_record(inst), float(seconds)) for inst, seconds in rows]
    return instances, [drive_record(d) for d in drives]


# -- volume claims ---------------------------------------------------------------------


async def take_volume(sessions: Sessions, drive: str, volume: str, instance: str) -> bool:
    """Write *volume* into *drive*'s row; False if another drive holds it (unique)."""
    stmt = (
        update(Drive)
        .where(Drive.name == drive)
        .values(volume=volume, state="busy", instance=instance, updated_at=utcnow())
    )
    try:
        async with sessions.begin() as session:
            await session.execute(stmt)
    except IntegrityError:
        return False
    return True


async def foreign_volumes(sessions: Sessions, own: Iterable[str], instance: str) -> set[str]:
    """The volumes held by drives that are neither in *own* nor *instance*'s."""
    stmt = select(Drive.volume).where(
        Drive.volume.is_not(None),
        Drive.name.not_in(sorted(own)),
        or_(Drive.instance.is_(None), Drive.instance != instance),
    )
    async with sessions() as session:
        volumes = (await session.scalars(stmt)).all()
    return {v for v in volumes if v is not None}


# -- reaping ---------------------------------------------------------------------------


async def release_expired(
    sessions: Sessions, instance: str, lease: timedelta
) -> tuple[list[str], list[tuple[str, str]]]:
    """Mark the instances whose lease expired reaped, close their open mounts and empty
    their drives, in one transaction that locks their rows (``SKIP LOCKED``).

    Returns the instances reaped and the (drive, volume) of each mount closed.
    """
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
    async with sessions.begin() as session:
        dead = list((await session.scalars(expired)).all())
        if not dead:
            return [], []
        await session.execute(update(Instance).where(Instance.id.in_(dead)).values(state=REAPED))
        drives = select(Drive.name).where(Drive.instance.in_(dead)).scalar_subquery()
        closed = await session.execute(
            update(Mount)
            .where(Mount.drive.in_(drives), Mount.dismounted_at.is_(None))
            .values(dismounted_at=now)
            .returning(Mount.drive, Mount.volume)
        )
        released = [(d, v) for d, v in closed.all()]
        await session.execute(
            update(Drive)
            .where(Drive.instance.in_(dead))
            .values(volume=None, state="empty", updated_at=now)
        )
    return dead, released


async def orphaned_active(sessions: Sessions, instance: str) -> list[tuple[int, str | None]]:
    """(id, instance) of the active requests held by instances no longer live."""
    gone = select(Instance.id).where(Instance.state != LIVE, Instance.id != instance)
    stmt = select(Request.id, Request.instance).where(
        Request.state == State.ACTIVE, Request.instance.in_(gone.scalar_subquery())
    )
    async with sessions() as session:
        return [(i, owner) for i, owner in (await session.execute(stmt)).all()]

"""The ``instances`` table: who shares the database, and since when each was last heard.

Heartbeats are written and compared in the database server's time (``now()``), so the
clocks of the tape servers never matter for deciding that an instance is dead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.db.models import Drive, Instance
from tssd.errors import ConfigError

LIVE, STOPPED, REAPED = "live", "stopped", "reaped"


class Registry:
    """This instance's row and the view of all the others."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], instance: str, host: str, lease_s: float
    ) -> None:
        self.sessions = sessions
        self.instance = instance
        self.host = host
        self.lease = timedelta(seconds=lease_s)

    async def register(self, drives: Sequence[str]) -> None:
        """Become live and take the rows of this host's drives; refuse a duplicate."""
        async with self.sessions.begin() as session:
            await self._check_duplicate(session)
            await self._check_drives(session, drives)
            row = await session.get(Instance, self.instance)
            if row is None:
                session.add(Instance(id=self.instance, host=self.host, pid=os.getpid()))
                await session.flush()
            await session.execute(
                update(Instance)
                .where(Instance.id == self.instance)
                .values(host=self.host, pid=os.getpid(), state=LIVE,
                        started_at=func.now(), heartbeat_at=func.now())
            )  # fmt: skip
            for name in drives:
                if await session.get(Drive, name) is None:
                    session.add(Drive(name=name, enabled=True, state="empty"))
            await session.flush()
            await session.execute(
                update(Drive).where(Drive.name.in_(list(drives))).values(instance=self.instance)
            )

    async def _check_duplicate(self, session: AsyncSession) -> None:
        row = await self._fresh(session, Instance.id == self.instance)
        if row is None:
            return
        # The same host with a dead pid is this instance restarting after a crash.
        other_process = row.pid != os.getpid() and _pid_alive(row.pid)
        if row.host != self.host or other_process:
            raise ConfigError(
                f"cluster.instance {self.instance!r} is live on {row.host} (pid {row.pid}): "
                "give every instance its own id"
            )

    async def _check_drives(self, session: AsyncSession, drives: Sequence[str]) -> None:
        stmt = select(Drive.name, Drive.instance).where(
            Drive.name.in_(list(drives)), Drive.instance != self.instance
        )
        for name, owner in (await session.execute(stmt)).all():
            if owner is not None and await self._fresh(session, Instance.id == owner):
                raise ConfigError(
                    f"drive {name} belongs to live instance {owner}: give every instance "
                    "its own drive names (sim.drive_prefix, scsi.drives)"
                )

    async def _fresh(self, session: AsyncSession, where: Any) -> Instance | None:
        stmt = select(Instance).where(
            where, Instance.state == LIVE, Instance.heartbeat_at >= func.now() - self.lease
        )
        return (await session.scalars(stmt)).first()

    async def renew(self) -> bool:
        """Renew the heartbeat; False if this instance was reaped (its lease is lost)."""
        stmt = (
            update(Instance)
            .where(Instance.id == self.instance, Instance.state == LIVE)
            .values(heartbeat_at=func.now())
        )
        async with self.sessions.begin() as session:
            return bool((await session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def others_live(self) -> bool:
        """Whether another instance shares the database right now."""
        stmt = select(func.count()).where(
            Instance.id != self.instance,
            Instance.state == LIVE,
            Instance.heartbeat_at >= func.now() - self.lease,
        )
        async with self.sessions() as session:
            return bool(await session.scalar(stmt))

    async def stopped(self) -> None:
        """A clean stop: nothing of ours is left to reap."""
        stmt = (
            update(Instance)
            .where(Instance.id == self.instance, Instance.state == LIVE)
            .values(state=STOPPED, heartbeat_at=func.now())
        )
        async with self.sessions.begin() as session:
            await session.execute(stmt)

    async def view(self) -> list[dict[str, Any]]:
        """Every instance with its state, heartbeat age and drives (``tssctl status``)."""
        age = func.extract("epoch", func.now() - Instance.heartbeat_at)
        async with self.sessions() as session:
            rows = (await session.execute(select(Instance, age).order_by(Instance.id))).all()
            drives = (await session.scalars(select(Drive).order_by(Drive.name))).all()
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for d in drives:
            entry = {"name": d.name, "state": d.state, "volume": d.volume}
            by_owner.setdefault(d.instance or "", []).append(entry)
        return [
            {
                "id": inst.id,
                "host": inst.host,
                "pid": inst.pid,
                "state": inst.state,
                "self": inst.id == self.instance,
                "started_at": inst.started_at.isoformat(),
                "heartbeat_at": inst.heartbeat_at.isoformat(),
                "heartbeat_age_s": round(float(seconds), 3),
                "drives": by_owner.get(inst.id, []),
            }
            for inst, seconds in rows
        ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

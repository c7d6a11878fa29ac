"""Release the leases of dead instances: their requests, drives and open mounts.

Every instance reaps. Marking an instance reaped, closing its open mounts and emptying its
drives is one transaction that locks the instance row (``SKIP LOCKED``), so two reapers
never release one instance twice. Requeueing its active requests is a second, idempotent
step that every pass repeats for every instance that is no longer live, so a reaper dying
between the two leaves nothing stranded.
"""

from __future__ import annotations

from datetime import timedelta

import structlog
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.cluster.registry import LIVE, REAPED
from tssd.db.models import Drive, Instance, Mount, Request, State, utcnow
from tssd.db.store import RequestStore

log = structlog.get_logger()


class Reaper:
    def __init__(self, store: RequestStore, instance: str, lease_s: float) -> None:
        self.store = store
        self.sessions: async_sessionmaker[AsyncSession] = store.sessions
        self.instance = instance
        self.lease = timedelta(seconds=lease_s)

    async def reap(self) -> list[str]:
        """One pass; return the instances found dead in it."""
        dead = await self._release_expired()
        await self._requeue_orphans()
        return dead

    async def _release_expired(self) -> list[str]:
        expired = (
            select(Instance.id)
            .where(
                Instance.state == LIVE,
                Instance.id != self.instance,
                Instance.heartbeat_at < func.now() - self.lease,
            )
            .with_for_update(skip_locked=True)
        )
        now = utcnow()
        async with self.sessions.begin() as session:
            dead = list((await session.scalars(expired)).all())
            if not dead:
                return []
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
            released = [(d, v) for d, v in closed.all()]
            await session.execute(
                update(Drive)
                .where(Drive.instance.in_(dead))
                .values(volume=None, state="empty", updated_at=now)
            )
        for name in dead:
            log.warning("cluster.instance_reaped", instance=name, by=self.instance)
        for drive, volume in released:
            log.info("cluster.volume_released", drive=drive, volume=volume)
        return dead

    async def _requeue_orphans(self) -> None:
        gone = select(Instance.id).where(Instance.state != LIVE, Instance.id != self.instance)
        stmt = select(Request.id, Request.instance).where(
            Request.state == State.ACTIVE, Request.instance.in_(gone.scalar_subquery())
        )
        async with self.sessions() as session:
            rows = (await session.execute(stmt)).all()
        by_owner: dict[str, list[int]] = {}
        for request_id, owner in rows:
            by_owner.setdefault(owner or "", []).append(request_id)
        for owner, ids in by_owner.items():
            moved = await self.store.transition(
                ids,
                (State.ACTIVE,),
                State.QUEUED,
                reason=f"instance {owner} lost its lease",
                values={"drive": None, "started_at": None},
            )
            log.warning("cluster.requests_requeued", instance=owner, count=len(moved))

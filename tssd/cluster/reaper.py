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

from tssd.db import cluster as db
from tssd.db.engine import Sessions
from tssd.db.store import RequestStore
from tssd.domain import State

log = structlog.get_logger()


class Reaper:
    def __init__(self, store: RequestStore, instance: str, lease_s: float) -> None:
        self.store = store
        self.sessions: Sessions = store.sessions
        self.instance = instance
        self.lease = timedelta(seconds=lease_s)

    async def reap(self) -> list[str]:
        """One pass; return the instances found dead in it."""
        dead = await self._release_expired()
        await self._requeue_orphans()
        return dead

    async def _release_expired(self) -> list[str]:
        dead, released = await db.release_expired(self.sessions, self.instance, self.lease)
        for name in dead:
            log.warning("cluster.instance_reaped", instance=name, by=self.instance)
        for drive, volume in released:
            log.info("cluster.volume_released", drive=drive, volume=volume)
        return dead

    async def _requeue_orphans(self) -> None:
        rows = await db.orphaned_active(self.sessions, self.instance)
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

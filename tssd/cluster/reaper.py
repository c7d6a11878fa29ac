"""Release the leases of dead instances: their requests, drives and open mounts.

Every instance reaps. Marking an instance reaped, closing its open mounts and emptying its
drives is one step of the book (:meth:`~tssd.ports.cluster.ClusterBook.release_expired`,
which releases each instance once however many reap), so two reapers never release one
instance twice. Requeueing its active requests is a second, idempotent step that every
pass repeats for every instance that is no longer live, so a reaper dying between the two
leaves nothing stranded.
"""

from __future__ import annotations

from datetime import timedelta

import structlog

from tssd.lifecycle import RequestLedger
from tssd.ports.cluster import ClusterBook

log = structlog.get_logger()


class Reaper:
    """Reaps for *instance* in *book*; requeues through *ledger*."""

    def __init__(
        self, book: ClusterBook, ledger: RequestLedger, instance: str, lease_s: float
    ) -> None:
        self.book = book
        self.ledger = ledger
        self.instance = instance
        self.lease = timedelta(seconds=lease_s)

    async def reap(self) -> list[str]:
        """One pass; return the instances found dead in it."""
        dead = await self._release_expired()
        await self._requeue_orphans()
        return dead

    async def _release_expired(self) -> list[str]:
        released = await self.book.release_expired(self.instance, self.lease)
        for name in released.instances:
            log.warning("cluster.instance_reaped", instance=name, by=self.instance)
        for drive, volume in released.mounts:
            log.info("cluster.volume_released", drive=drive, volume=volume)
        return list(released.instances)

    async def _requeue_orphans(self) -> None:
        by_owner: dict[str, list[int]] = {}
        for orphan in await self.book.orphaned_active(self.instance):
            by_owner.setdefault(orphan.instance or "", []).append(orphan.request_id)
        for owner, ids in by_owner.items():
            moved = await self.ledger.restart(ids, f"instance {owner} lost its lease")
            log.warning("cluster.requests_requeued", instance=owner, count=len(moved))

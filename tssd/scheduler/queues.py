"""What the scheduler reads from the database besides requests, cached between full passes:
queue settings (``tssctl queues set`` writes them), mount history for the daily budget,
and the pending recalls that fill the planner.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from tssd.db.interface import MountBook
from tssd.ports.scheduling import CandidateReads, QueueSettings
from tssd.scheduler.context import QueuePolicy
from tssd.scheduler.planner import Entry

DAY_S = 86400.0
#: Size assumed for a recall whose size nobody told us yet (for cost estimates only).
DEFAULT_SIZE = 2 * 10**9


async def load_queues(queues: QueueSettings) -> dict[str, QueuePolicy]:
    rows = await queues.rows()
    return {
        q.name: QueuePolicy(
            priority=q.priority or 0,
            max_drives=q.max_drives,
            paused=q.paused,
            latency_target_s=q.latency_target_s,
        )
        for q in rows
    }


async def load_pending(reads: CandidateReads, now: float, wall: datetime) -> list[Entry]:
    """Every queued, located recall, as planner entries (arrival from ``created_at``)."""
    entries = []
    async for rid, volume, position, size, priority, queue, created in reads.pending_recalls():
        age = (wall - created).total_seconds() if created is not None else 0.0
        entries.append(
            Entry(rid, volume or "", position or 0, size or DEFAULT_SIZE, priority or 0,
                  queue or "default", now - max(0.0, age))
        )  # fmt: skip
    return entries


class MountLedger:
    """Mount times per volume over the last day (the per-tape mount budget)."""

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}
        #: Volumes mounted since the ranking last looked (their budget may be used up).
        self.recorded: set[str] = set()

    def record(self, volume: str, at: float) -> None:
        self._times.setdefault(volume, deque()).append(at)
        self.recorded.add(volume)

    def count(self, volume: str, now: float) -> int:
        times = self._times.get(volume)
        if not times:
            return 0
        while times and times[0] <= now - DAY_S:
            times.popleft()
        return len(times)

    def free_at(self, volume: str, now: float, budget: int) -> float:
        """When the budget lets *volume* be mounted again."""
        times = self._times.get(volume)
        if not times or self.count(volume, now) < budget:
            return now
        return times[len(times) - budget] + DAY_S

    async def load(self, mounts: MountBook, now: float, wall: datetime) -> None:
        """Mounts of the last day recorded by earlier runs."""
        for volume, at in await mounts.requested_since(wall - timedelta(seconds=DAY_S)):
            self.record(volume, now - (wall - at).total_seconds())

"""Priority tiers of a recall session: which higher-priority requests interrupt a pass of
a mounted tape, when, and by when a claimed one should be read.

A pass reads the requests of one priority floor (its tier) and up. Requests of a higher
priority that arrive for the mounted tape interrupt it once they waited
``interrupt_after_s`` (turning the head round costs locates; waiting lets later ones share
the detour). With software RAO the pass that follows claims them with the tape's other
work, and the read order places them where they cost least before their deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tssd.scheduler.drives import DriveManager
from tssd.scheduler.planner import Entry, Planner


class PriorityTiers:
    """Mixin of :class:`~tssd.scheduler.sessions.SessionRunner`: its tier bookkeeping."""

    drives: DriveManager
    _claimed_entries: dict[int, Entry]

    def init_tiers(self) -> None:
        #: A pass is interrupted for higher-priority requests once they waited this long.
        self.interrupt_after_s = 0.0
        #: With RAO, higher-priority files join a pass's read order within at least this
        #: many seconds (model time) of its start.
        self.urgent_within_s = 0.0
        #: Latency aimed at for higher-priority requests (``urgent_target_s``).
        self.urgent_target_s = 0.0
        #: Latency target of each queue that has one (set by the scheduler): it replaces
        #: ``urgent_target_s`` for that queue's requests.
        self.queue_targets: Callable[[], Mapping[str, float]] = dict
        #: The scheduler's per-tape index, when it keeps one (set by the scheduler).
        self.planner: Planner | None = None
        #: Drives whose recall session should end after the file being read.
        self.yield_requested: set[str] = set()
        #: Claimed, unread requests of a priority above 0 per drive: (priority, arrival).
        self._held: dict[str, dict[int, tuple[int, float]]] = {}
        #: Priority floor of each drive's current pass (None = every request).
        self._tiers: dict[str, int | None] = {}

    def set_tier(self, drive: str, priority: int) -> None:
        """The priority a session starts with, until its first pass sets its own."""
        self._tiers[drive] = priority if priority > 0 else None

    def tier_of(self, drive: str) -> int:
        """Priority floor of the pass *drive* is running (0 = ordinary work), or the top
        priority queued for its tape: a session about to serve urgent requests (batched,
        see :meth:`_due`) is not ordinary work either."""
        state = self.drives.drives.get(drive)
        queued = self._top_priority(state.volume) if state is not None and state.volume else None
        held = max((p for p, _ in self._held.get(drive, {}).values()), default=0)
        return max(self._tiers.get(drive) or 0, queued or 0, held)

    def _top_priority(self, volume: str) -> int | None:
        """The highest request priority above 0 queued for *volume* (planner only)."""
        tape = self.planner.tapes.get(volume) if self.planner is not None else None
        top = tape.max_priority() if tape is not None else 0
        return top if top > 0 else None

    def _interrupted(self, drive: str, volume: str) -> bool:
        """Yield requested, or requests of a higher priority than the pass's waited long."""
        if drive in self.yield_requested:
            return True
        tier = self._tiers.get(drive) or 0
        if self._due(volume, tier):
            return True
        # Claimed with the pass but not reached yet: read them first once they are due.
        held = [a for p, a in self._held.get(drive, {}).values() if p > tier]
        return bool(held) and self.drives.clock.now() - min(held) >= self.interrupt_after_s

    def _due(self, volume: str, tier: int) -> bool:
        """Requests of a priority above *tier* wait on *volume*, the oldest for at least
        ``interrupt_after_s``: turning the head round for them costs two locates, and
        waiting (as a tape waiting for a drive does) lets later ones share the detour."""
        top = self._top_priority(volume)
        if top is None or top <= tier:
            return False
        tape = self.planner.tapes.get(volume) if self.planner is not None else None
        if tape is None or self.interrupt_after_s <= 0:
            return True
        return self.drives.clock.now() - tape.oldest_above(tier) >= self.interrupt_after_s

    def _read_within(self, request_id: int) -> float:
        """Seconds from now within which a claimed higher-priority request should be read:
        until ``urgent_target_s`` (its queue's latency target, if it has one) after its
        arrival, and at least ``urgent_within_s``."""
        entry = self._claimed_entries.get(request_id)
        if entry is None:
            return self.urgent_within_s
        target = self.queue_targets().get(entry.queue, self.urgent_target_s)
        left = entry.arrived + target - self.drives.clock.now()
        return max(self.urgent_within_s, left)

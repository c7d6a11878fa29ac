"""Priority tiers of a recall session: which higher-priority requests interrupt a pass of
a mounted tape, when, and by when a claimed one should be read.

A pass reads the requests of one priority floor (its tier) and up. Requests of a higher
priority that arrive for the mounted tape interrupt it once they waited
``interrupt_after_s`` (turning the head round costs locates; waiting lets later ones share
the detour). With software RAO the pass that follows claims them with the tape's other
work, and the read order places them where they cost least before their deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.planner import Entry, Planner


class PriorityTiers:
    """The tier rules of the recall sessions, held by
    :class:`~tssd.scheduler.sessions.SessionRunner` (the scheduler asks it through the
    runner: which session yields, at which priority each runs). Each drive's tier state
    (floor, yield, stop, held requests) lives in its
    :class:`~tssd.scheduler.drive_session.DriveSession`, found in *sessions*.

    Without a *planner* (policies other than ``tssd``) no request interrupts a pass.
    """

    def __init__(
        self,
        sessions: DriveSessions,
        planner: Planner | None = None,
        *,
        interrupt_after_s: float = 0.0,
        urgent_within_s: float = 0.0,
        urgent_target_s: float = 0.0,
        queue_targets: Callable[[], Mapping[str, float]] = dict,
    ) -> None:
        self.sessions = sessions
        self.clock = sessions.clock
        #: The scheduler's per-tape index, when it keeps one.
        self.planner = planner
        #: A pass is interrupted for higher-priority requests once they waited this long.
        self.interrupt_after_s = interrupt_after_s
        #: With RAO, higher-priority files join a pass's read order within at least this
        #: many seconds (model time) of its start.
        self.urgent_within_s = urgent_within_s
        #: Latency aimed at for higher-priority requests (``urgent_target_s``).
        self.urgent_target_s = urgent_target_s
        #: Latency target of each queue that has one: it replaces ``urgent_target_s`` for
        #: that queue's requests.
        self.queue_targets = queue_targets

    @property
    def yielding(self) -> Set[str]:
        """Drives asked to yield."""
        return self.sessions.yielding()

    def yields(self, drive: str) -> bool:
        """Whether *drive*'s session was asked to yield."""
        return self.sessions.of(drive).yield_requested

    def ask_yield(self, drive: str) -> None:
        """End *drive*'s recall session after the file it is reading."""
        self.sessions.of(drive).yield_requested = True

    def set_floor(self, drive: str, floor: int | None) -> None:
        """The priority floor of the pass *drive* begins (None: every request)."""
        self.sessions.of(drive).floor = floor

    def floor(self, drive: str) -> int | None:
        return self.sessions.of(drive).floor

    def hold(self, drive: str, held: dict[int, tuple[int, float]]) -> None:
        """Claimed higher-priority requests of *drive*'s batch (id: (priority, arrival)),
        read first once due."""
        if self.planner is None:
            # No request interrupts these policies' passes; held here (with no arrival
            # known) each would end its batch after one file, and the pass would claim
            # and give back the tape's queue once per file (issue 18).
            return
        self.sessions.of(drive).held = held

    def reached(self, drive: str, request_id: int) -> None:
        """*drive* read (or gave up) *request_id*."""
        self.sessions.of(drive).held.pop(request_id, None)

    def batch_done(self, drive: str) -> None:
        self.sessions.of(drive).held = {}

    def tier_of(self, drive: str) -> int:
        """Priority floor of the pass *drive* is running (0 = ordinary work), or the top
        priority queued for its tape: a session about to serve urgent requests (batched,
        see :meth:`due`) is not ordinary work either."""
        session = self.sessions.of(drive)
        state = session.drive
        queued = self.top_priority(state.volume) if state is not None and state.volume else None
        return max(session.floor or 0, queued or 0, session.held_top())

    def top_priority(self, volume: str) -> int | None:
        """The highest request priority above 0 queued for *volume* (planner only)."""
        tape = self.planner.tapes.get(volume) if self.planner is not None else None
        top = tape.max_priority() if tape is not None else 0
        return top if top > 0 else None

    def interrupted(self, drive: str, volume: str) -> bool:
        """Yield requested, or requests of a higher priority than the pass's waited long."""
        session = self.sessions.of(drive)
        if session.yield_requested:
            return True
        if self.clock.now() >= session.stop_at:
            session.yield_requested = True
            return True
        tier = session.floor or 0
        if self.due(volume, tier):
            return True
        # Claimed with the pass but not reached yet: read them first once they are due.
        held = [a for p, a in session.held.values() if p > tier]
        return bool(held) and self.clock.now() - min(held) >= self.interrupt_after_s

    def due(self, volume: str, tier: int) -> bool:
        """Requests of a priority above *tier* wait on *volume*, the oldest for at least
        ``interrupt_after_s``: turning the head round for them costs two locates, and
        waiting (as a tape waiting for a drive does) lets later ones share the detour."""
        top = self.top_priority(volume)
        if top is None or top <= tier:
            return False
        tape = self.planner.tapes.get(volume) if self.planner is not None else None
        if tape is None or self.interrupt_after_s <= 0:
            return True
        return self.clock.now() - tape.oldest_above(tier) >= self.interrupt_after_s

    def read_within(self, entry: Entry | None) -> float:
        """Seconds from now within which a claimed higher-priority request (its planner
        *entry*, if known) should be read: until ``urgent_target_s`` after its arrival, and
        at least ``urgent_within_s``; for a queue with a latency target, until its deadline
        (0 once passed: read first)."""
        if entry is None:
            return self.urgent_within_s
        targets = self.queue_targets()
        if entry.queue in targets:
            # A queue's target is a promise: with its deadline near the file is read
            # first (one locate more) rather than up to ``urgent_within_s`` late.
            return max(0.0, entry.arrived + targets[entry.queue] - self.clock.now())
        left = entry.arrived + self.urgent_target_s - self.clock.now()
        return max(self.urgent_within_s, left)

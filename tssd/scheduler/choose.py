"""The ``tssd`` policy's choice of recall tapes: planner + cost model, once per pass.

Keeps the last pass's verdicts (which rule holds each tape) and estimated start times,
which ``explain.py`` turns into ``tssctl why`` answers and request ETAs.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections import Counter
from collections.abc import Callable, Iterable, Set
from dataclasses import InitVar, dataclass, field, replace
from typing import Protocol

import structlog

from tssd.clock import Clock, utcnow
from tssd.config import SchedulerSettings
from tssd.ports.scheduling import CandidateReads, QueueSettings
from tssd.scheduler.balance import pre_read
from tssd.scheduler.context import Context, QueuePolicy
from tssd.scheduler.cost import (
    Verdict,
    evaluate,
    handover_s,
    mount_cost_s,
    target_deadline,
    urgent_since,
)
from tssd.scheduler.drive_session import DriveSessions, Running
from tssd.scheduler.drives import DriveState
from tssd.scheduler.planner import Planner
from tssd.scheduler.queues import MountLedger, load_pending, load_queues
from tssd.scheduler.ranking import Ranking, exact_for, mounted_eligible
from tssd.scheduler.stagger import stagger_end
from tssd.tape.geometry import Profile

log = structlog.get_logger()
#: Entries added to the new index per loop turn while a resync rebuilds it.
RESYNC_CHUNK = 1_000
#: Old tapes released per loop turn after a resync (a few thousand entries).
RESYNC_TAPES = 10


__all__ = ["Chooser", "DriveView", "Plan", "Running", "plan_starts"]


class DriveView(Protocol):
    """What the chooser reads of the drives (:class:`~tssd.scheduler.drives.DriveManager`
    has it): it ranks tapes, it never changes a drive."""

    @property
    def drives(self) -> dict[str, DriveState]:
        """Every drive by name."""
        ...

    @property
    def ledger(self) -> MountLedger:
        """The mounts of the last day (each tape's mount budget)."""
        ...

    def free(self) -> list[DriveState]:
        """The enabled drives that are not busy."""
        ...


@dataclass
class Plan:
    """A pass's eligible tapes: what ``Scheduler._assign_planned`` gives drives.

    ``walk`` yields them best first (lazily: a pass with one free drive takes one or two);
    ``mounted`` counts those sitting in a free drive (migrations go in line after them);
    ``urgent_after(seen)`` gives, best first, those of priority above 0 the pass did not
    reach (its waiting list: preemption and ``urgent_late``); ``close`` ends the walk.
    """

    walk: Iterable[Verdict]
    mounted: int
    urgent_after: Callable[[Set[str]], list[Verdict]]
    close: Callable[[], None] = lambda: None

    @classmethod
    def of(cls, ranked: list[Verdict]) -> Plan:
        """The plan of a full ranking."""
        urgent = [v for v in ranked if v.priority > 0]
        return cls(
            ranked, sum(1 for v in ranked if not v.mount_s),
            lambda seen: [v for v in urgent if v.volume not in seen],
        )  # fmt: skip


@dataclass
class Chooser:
    """The ``tssd`` policy's ranking of recall tapes, pass after pass, and what it saw:
    each tape's verdict, the planned starts, the sessions running (the scheduler tells
    it through :meth:`started`, :meth:`ended` and :meth:`waiting`). A session's tour
    (its estimated end, its stagger cap) is kept in its drive's
    :class:`~tssd.scheduler.drive_session.DriveSession` (*sessions*: the scheduler's,
    else one of its own over *drives*)."""

    settings: SchedulerSettings
    #: The queue's reads (``store.scheduling``) and the queues' rows (``store.queue_settings``).
    pending: CandidateReads
    queue_rows: QueueSettings
    drives: DriveView
    profile: Profile
    clock: Clock
    planner: Planner = field(default_factory=Planner)
    queues: dict[str, QueuePolicy] = field(default_factory=dict)
    #: The scheduler's session objects (default: a registry of its own over *drives*).
    drive_sessions: InitVar[DriveSessions | None] = None
    #: Last pass: every tape's verdict (and ``starts``: the estimated start of eligible ones).
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    _starts: dict[str, float] | None = field(default_factory=dict, repr=False)
    #: What ``starts`` is computed from after an incremental pass: its busy volumes, the
    #: mountable test and the drives' free times then.
    _starts_from: tuple[frozenset[str], Callable[[str], bool], tuple[float, ...]] = field(
        default=(frozenset(), lambda _: True, ()), repr=False
    )
    #: Rank incrementally (``ranking.py``) where that gives the full ranking's order.
    incremental: bool = True
    resynced_at: float = float("-inf")
    #: Last pass: tapes of due higher-priority requests that found no free drive.
    urgent_waiting: frozenset[str] = frozenset()
    #: Last pass: tapes urgent because they would miss a queue's latency target.
    late: frozenset[str] = frozenset()
    #: The periodic resync running in the background (refresh), if any.
    _resync: asyncio.Task[None] | None = field(default=None, repr=False)
    #: Bulk sessions stopped early to stagger the drives (``stagger.py``, kept as each
    #: session's ``capped``): the volumes so split (each once), and those left in a free
    #: drive (ranked as unmounted: the drive takes another tape).
    was_split: set[str] = field(default_factory=set, repr=False)
    split: set[str] = field(default_factory=set, repr=False)
    #: Tapes a freeing drive reads part of first, to end the drives together
    #: (``balance.py``): volume -> seconds of reading.
    pre_reads: dict[str, float] = field(default_factory=dict, repr=False)
    ranking: Ranking = field(init=False, repr=False)
    sessions: DriveSessions = field(init=False, repr=False)

    def __post_init__(self, drive_sessions: DriveSessions | None) -> None:
        self.ranking = Ranking(self.planner)
        self.sessions = drive_sessions or DriveSessions(self.drives.drives, self.clock)

    @property
    def running(self) -> dict[str, Running]:
        """Recall sessions by drive name, in the order they started."""
        return self.sessions.tours()

    @property
    def starts(self) -> dict[str, float]:
        """Estimated start of each eligible tape as of the last pass (list scheduling);
        after an incremental pass computed when first read (the ranking's keys do not
        change between passes)."""
        if self._starts is None:
            busy, mountable, free_at = self._starts_from
            self._starts = plan_starts(self.ranking.ordered(busy, mountable), list(free_at))
        return self._starts

    def targets(self) -> dict[str, float]:
        """Latency target of each queue that has one."""
        return {
            name: q.latency_target_s
            for name, q in self.queues.items()
            if q.latency_target_s is not None
        }

    def resync_soon(self) -> None:
        """Reload the planner at the next full pass, however recent the last reload."""
        self.resynced_at = float("-inf")

    def waiting(self, urgent: frozenset[str]) -> None:
        """The tapes of due higher-priority requests this pass found no drive for."""
        self.urgent_waiting = urgent

    async def resync(self) -> None:
        """Reload the planner and the queue settings from the database.

        The new index is built beside the one in use, a chunk per loop turn, and then
        swapped in: rebuilt in one go, a million recalls stalled the loop 16 s (issue 22).
        """
        self.planner.begin_resync()
        entries = await load_pending(self.pending, self.clock.now(), utcnow())
        fresh = Planner()
        for i in range(0, len(entries), RESYNC_CHUNK):
            chunk = entries[i : i + RESYNC_CHUNK]
            for entry in chunk:
                known = self.planner.get(entry.id)
                if known is not None:
                    entry.arrived = known.arrived
            fresh.add(chunk)
            await asyncio.sleep(0)
        # The aggregates replace() compares, computed a chunk of tapes per loop turn.
        for i, tape in enumerate(fresh.tapes.values()):
            tape.summary()
            if i % 10 == 9:
                await asyncio.sleep(0)
        retired = self.planner.replace(fresh)
        # A million loaded entries made every full collection of the cyclic GC walk them
        # (0.3-0.8 s, stalling the decision of whichever pass allocated): the long-lived
        # index goes to the permanent generation (issue 22).
        gc.freeze()
        # Freed a few tapes per loop turn: dropping a million entries at once is a stall.
        while retired:
            del retired[-RESYNC_TAPES:]
            await asyncio.sleep(0)
        self.queues = await load_queues(self.queue_rows)
        self.resynced_at = self.clock.now()
        log.debug("planner.resynced", pending=len(self.planner), tapes=len(self.planner.tapes))

    async def refresh(self, *, full: bool) -> None:
        if full:
            due = self.clock.now() - self.resynced_at >= self.settings.resync_s
            if due and self._resync is None:
                # In the background: a pass, and with it the decision for a drive freed
                # meanwhile, waited for a million rows to load (5-10 s; issue 22).
                self._resync = asyncio.create_task(self.resync(), name="planner-resync")
                self._resync.add_done_callback(self._resynced)
            self.queues = await load_queues(self.queue_rows)

    async def close(self) -> None:
        """Cancel a resync running in the background (shutdown): it holds a database
        connection, which must go back before the engine is disposed (an aiosqlite
        connection never closed keeps its thread, and with it the process, alive)."""
        task, self._resync = self._resync, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _resynced(self, task: asyncio.Task[None]) -> None:
        self._resync = None
        if not task.cancelled() and task.exception() is not None:
            # Retried by the next full pass (resynced_at is unchanged).
            log.warning("planner.resync_failed", error=str(task.exception()))

    def _context(self, mountable: Callable[[str], bool]) -> Context:
        now = self.clock.now()
        free = self.drives.free()
        return Context(
            now=now, settings=self.settings, profile=self.profile, queues=self.queues,
            mounted=frozenset(d.volume for d in free if d.volume and d.volume not in self.split),
            queue_drives=Counter(r.queue for r in self.running.values()),
            mounts_today=lambda v: self.drives.ledger.count(v, now),
            starts=self.starts if self.targets() else {}, targets=self.targets(),
            late=self.late, mountable=mountable, free=tuple(free),
            next_free=min((max(now, r.until) for r in self.running.values()), default=math.inf),
        )  # fmt: skip

    def plan(self, busy: Set[str], mountable: Callable[[str], bool], touched: Set[str]) -> Plan:
        """The pass's eligible tapes (:class:`Plan`). *touched*: volumes reserved or
        released since the last pass (``Reservations.drain_touched``)."""
        if self.ranking.planner is not self.planner:  # replaced (tests)
            self.ranking = Ranking(self.planner)
        ctx = self._context(lambda _: True)
        if not (self.incremental and exact_for(ctx)):
            self.ranking.invalidate()
            return self._balanced(Plan.of(self.rank(busy, mountable)), ctx)
        ledger, now = self.drives.ledger, ctx.now
        touched = set(touched) | ledger.recorded
        ledger.recorded = set()
        budget = self.settings.mount_budget_per_day
        self.ranking.refresh(ctx, busy, touched, lambda v: ledger.free_at(v, now, budget))
        self.verdicts = self.ranking.verdicts
        self.late = frozenset()
        busy = frozenset(busy)
        self._starts, self._starts_from = None, (busy, mountable, tuple(self._free_at(now)))
        walk = self.ranking.walk(busy, mountable)
        return self._balanced(
            Plan(
                walk, mounted_eligible(self.ranking, ctx, busy, mountable),
                lambda seen: self.ranking.urgent_after(seen, busy, mountable), walk.close,
            ),
            ctx,
        )  # fmt: skip

    def _balanced(self, plan: Plan, ctx: Context) -> Plan:
        """*plan*, or near the end of bulk work while a queue has a latency target, the
        same with the tape a free drive should read part of first (``balance.py``)."""
        self.pre_reads.clear()
        if not ctx.free or not ctx.targets or plan.mounted:
            return plan
        eligible = [v for v in self.verdicts.values() if not v.rule]
        drives = sum(1 for d in self.drives.drives.values() if d.enabled)
        longest = max((v.service_s for v in eligible), default=0.0)
        if not eligible or sum(v.service_s for v in eligible) >= drives * longest:
            return plan
        ranked = list(plan.walk)
        if any(v.priority > 0 for v in ranked):
            return replace(plan, walk=ranked)
        others = [max(ctx.now, r.until) for r in self.running.values()]
        margin = 2 * mount_cost_s(self.profile)
        chosen = pre_read(ctx.now, others, [v.service_s for v in ranked], drives, margin)
        if chosen is None:
            return replace(plan, walk=ranked)
        first, seconds = chosen
        self.pre_reads[ranked[first].volume] = seconds
        log.debug("balance.pre_read", volume=ranked[first].volume, seconds=round(seconds))
        return replace(plan, walk=[ranked[first], *ranked[:first], *ranked[first + 1 :]])

    def rank(self, busy: Iterable[str], mountable: Callable[[str], bool]) -> list[Verdict]:
        """Eligible tapes, best first, every tape scored; verdicts of all kept for explain
        (the full ranking: :meth:`plan` uses it where the incremental one is not exact)."""
        ctx = replace(self._context(mountable), starts=self.starts)
        busy = set(busy)
        verdicts = {}
        for tape in self.planner.queues():
            if tape.volume in busy:
                continue
            verdicts[tape.volume] = evaluate(tape, ctx)  # its hold rules: rules.py
        self.verdicts = verdicts
        self.late = frozenset(v.volume for v in verdicts.values() if v.late)
        eligible = sorted((v for v in verdicts.values() if not v.rule), key=lambda v: v.key)
        self._starts = plan_starts(eligible, self._free_at(ctx.now))
        return eligible

    def _free_at(self, now: float) -> list[float]:
        """When each enabled drive is free, soonest first (for :func:`plan_starts`)."""
        enabled = [d for d in self.drives.drives.values() if d.enabled]
        running = self.running
        return sorted(
            max(now, running[d.name].until) if d.name in running else now for d in enabled
        )

    def started(self, drive: str, verdict_volume: str, queue: str, priority: int,
                service_s: float) -> float | None:  # fmt: skip
        """A recall session began on *drive*; returns when it should stop early to stagger
        the drives (``stagger.py``: only a bulk session while a queue has a latency
        target), or ``None``."""
        now = self.clock.now()
        self.split.discard(verdict_volume)
        stop = self._stagger(drive, verdict_volume, priority, service_s, now)
        seconds = self.pre_reads.pop(verdict_volume, None)
        if seconds is not None and stop is None:
            stop = now + self.profile.mount_s() + seconds
        until = now + service_s if stop is None else stop
        session = self.sessions.of(drive)
        session.begin_tour(Running(verdict_volume, queue, priority, until))
        if stop is not None:
            session.capped = (verdict_volume, stop)
            self.was_split.add(verdict_volume)
        return stop

    def _stagger(
        self, drive: str, volume: str, priority: int, service_s: float, now: float
    ) -> float | None:
        if priority > 0 or volume in self.was_split or not self.targets():
            return None
        drives = sum(1 for d in self.drives.drives.values() if d.enabled)
        # Near the end (less work queued than a session per drive) the drives should end
        # together: nothing is split.
        queued = sum(v.service_s for v in self.verdicts.values() if not v.rule)
        if queued < drives * service_s:
            return None
        others = [max(now, r.until) for name, r in self.running.items() if name != drive]
        return stagger_end(now, service_s, others, drives)

    def ended(self, drive: str) -> None:
        capped = self.sessions.of(drive).end_tour()
        tape = self.planner.tapes.get(capped[0]) if capped is not None else None
        if capped is not None and tape is not None and tape.entries:
            self.split.add(capped[0])  # its rest waits as an ordinary tape

    def preempt(
        self, waiting: list[Verdict], yielding: Set[str], tier_of: Callable[[str], int]
    ) -> list[str]:
        """Drives whose sessions should yield to higher-priority tapes still waiting.

        Two reasons: a tape's oldest higher-priority request waited ``preempt_after_s``,
        or a tape's target-bearing requests would otherwise miss their deadline
        (:meth:`target_victims`). A session's priority is that of its current pass
        (*tier_of*): once a tape's urgent requests are read, the rest of its queue is
        ordinary work and may yield.
        """
        for name, running in self.running.items():
            running.priority = tier_of(name)
        delay = self.settings.preempt_after_s
        if not waiting:
            return []
        now = self.clock.now()
        tapes = self.planner.tapes
        aged = [
            v
            for v in waiting
            if v.priority > 0 and delay >= 0 and now - urgent_since(tapes[v.volume]) >= delay
        ]
        spare = max(0, len(yielding) - len(aged))
        rest = [v for v in waiting if v not in aged]
        needing = aged[: max(0, len(aged) - len(yielding))] + self.target_victims(rest, now, spare)
        # The lowest priority first; among equals the session with the most work left,
        # which would hold its drive longest (its leftover is a remount like any other's).
        victims = sorted(
            (r.priority, -r.until, name) for name, r in self.running.items() if name not in yielding
        )
        chosen: list[str] = []
        for verdict in needing:
            if not victims or victims[0][0] >= verdict.priority:
                break
            chosen.append(victims.pop(0)[2])
        return chosen

    def target_victims(self, waiting: list[Verdict], now: float, spare: int) -> list[Verdict]:
        """The waiting tapes of target-bearing requests that need a session to yield to
        reach them by their deadlines. Asked only at a tape's last moment (from its
        deadline minus the drive time to reach it and the longest handover, until the
        deadline), so that drives freeing up on their own and later requests for the same
        tape get their chance first; then the tape waits because no drive is free, and a
        plan that has a session ending by now only shows that the session overran its
        estimate. Once the deadline passed a preemption no longer meets it. *spare*
        drives already yielding take one such tape each; a freed drive then visits the
        other due tapes in turn (``urgent_late``).
        """
        lead = handover_s(self.profile)
        needing = []
        for verdict in waiting:
            last_moment = verdict.deadline - verdict.reach_s - lead
            if verdict.priority <= 0 or not last_moment <= now < verdict.deadline:
                continue  # no target, not at its last moment yet, or missed already
            if spare:
                spare -= 1
            else:
                needing.append(verdict)
        return needing

    def next_last_moment(self) -> float:
        """The earliest last moment still ahead (clock seconds; ``inf``: none) among the
        tapes of target-bearing requests the last pass saw: the moment a target preemption
        or a due tape may be decided (:meth:`target_victims`). The scheduler wakes for it:
        with passes only on events or every ``tick_s``, a last moment falling between two
        passes was acted on up to a tick late, and the request missed its target by that.
        """
        if not self.targets():
            return math.inf
        now, lead = self.clock.now(), handover_s(self.profile)
        moments = (
            v.deadline - v.reach_s - lead for v in self.verdicts.values() if v.deadline < math.inf
        )
        return min((m for m in moments if m > now), default=math.inf)

    def urgent_late(self, volume: str) -> bool:
        """Whether a tape other than *volume* holds due higher-priority requests that the
        last pass's plan starts later than ``urgent_target_s`` after they arrived (or, for
        requests of a queue with a latency target, after their deadline)."""
        target = self.settings.urgent_target_s
        targets = self.targets()
        tapes = self.planner.tapes
        for other in self.urgent_waiting - {volume}:
            tape = tapes.get(other)
            if tape is None or not tape.entries:
                continue
            start = self.starts.get(other, math.inf)
            deadline = target_deadline(tape, targets)
            if start > (deadline if deadline < math.inf else urgent_since(tape) + target):
                return True
        return False

    def write_cap(self) -> int:
        """Drives migrations may hold while recalls wait."""
        enabled = sum(1 for d in self.drives.drives.values() if d.enabled)
        return max(1, math.ceil(self.settings.write_share * enabled))


def plan_starts(eligible: Iterable[Verdict], free_at: list[float]) -> dict[str, float]:
    """Estimated start of each eligible tape: list scheduling on drives free at *free_at*
    (sorted; consumed)."""
    if not free_at:
        return {}
    starts = {}
    for verdict in eligible:
        start = free_at[0]
        starts[verdict.volume] = start
        free_at[0] = start + verdict.service_s
        free_at.sort()
    return starts

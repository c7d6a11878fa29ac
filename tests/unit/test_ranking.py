"""The incremental ranking (tssd/scheduler/ranking.py) gives the full ranking's choice.

Random sequences of what changes between passes (requests added, claimed or finished,
time passing, queues paused, limited or raised, sessions starting and ending, drives
freed with a tape in them or asking for cleaning, volumes reserved or unavailable, mounts
using up a tape's budget, a resync replacing the index) are applied to one planner; after
each, the incremental plan must give the eligible tapes, in order, with the verdicts of a
full ranking of every tape at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.db.memory import MemoryStore
from tssd.scheduler.choose import Chooser, Running
from tssd.scheduler.context import QueuePolicy
from tssd.scheduler.cost import Verdict
from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.drives import DriveState
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger

VOLUMES = ("A", "B", "C", "D", "E", "F")
QUEUES = ("default", "a", "b")
GB = 10**9
SETTINGS = SchedulerSettings(
    max_wait_s=5000.0, fill_wait_s=300.0, fill_bytes=5 * GB, fill_files=4,
    mount_budget_per_day=2, urgent_batch_s=600.0, age_weight=1.0,
)  # fmt: skip


@dataclass
class World:
    """What a scheduler would hold: the planner, drives, reservations, the clock."""

    now: float = 10_000.0
    planner: Planner = field(default_factory=Planner)
    drives: dict[str, DriveState] = field(
        default_factory=lambda: {n: DriveState(n) for n in ("d1", "d2", "d3")}
    )
    ledger: MountLedger = field(default_factory=MountLedger)
    busy: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    unavailable: set[str] = field(default_factory=set)
    next_id: int = 1
    #: The drives' session objects, shared by the choosers compared (as the scheduler's).
    sessions: DriveSessions = field(init=False)

    def __post_init__(self) -> None:
        self.sessions = DriveSessions(self.drives, WorldClock(self))

    def chooser(self, *, incremental: bool) -> Chooser:
        drives = SimpleNamespace(
            drives=self.drives, ledger=self.ledger,
            free=lambda: [d for d in self.drives.values() if d.enabled and not d.busy],
        )  # fmt: skip
        queue = MemoryStore()
        chooser = Chooser(
            SETTINGS, queue.scheduling, queue.queue_settings, drives, LTO9, WorldClock(self),
            planner=self.planner,
            drive_sessions=self.sessions,
        )  # fmt: skip
        chooser.incremental = incremental
        return chooser

    def mountable(self, volume: str) -> bool:
        return volume not in self.unavailable


def apply(world: World, chooser: Chooser, op: tuple[Any, ...]) -> None:
    kind, a, b, c = op
    if kind == "add":
        entries = []
        for k in range(1 + c % 5):
            entries.append(
                Entry(world.next_id, VOLUMES[a % 6], (b + k * 3) % 40 + 1, (1 + c % 7) * GB // 2,
                      (0, 0, 1, 5)[(b + k) % 4], QUEUES[(a + k) % 3], world.now - (c % 4) * 400)
            )  # fmt: skip
            world.next_id += 1
        world.planner.add(entries)
    elif kind == "take":
        ids = sorted(world.planner._where)
        if ids:
            world.planner.take(ids[(a * 7 + b) % len(ids) :][: 1 + c % 30])
    elif kind == "time":
        world.now += (0, 1, 60, 299, 300, 600, 1000, 4999, 5000, 20_000, 86_400)[a % 11] + b % 2
    elif kind == "queue":
        chooser.queues = dict(chooser.queues)
        chooser.queues[QUEUES[a % 3]] = QueuePolicy(
            priority=(0, 0, 2, -1)[b % 4], max_drives=(None, None, 0, 1)[c % 4],
            paused=(b + c) % 5 == 0,
        )  # fmt: skip
    elif kind == "session":  # a session starts (reserving its tape) or ends
        drive = ("d1", "d2", "d3")[a % 3]
        if drive in chooser.running:
            volume = chooser.running[drive].volume
            chooser.sessions.of(drive).end_tour()
            world.busy.discard(volume)
            world.drives[drive].busy = False
            world.drives[drive].volume = volume if b % 2 else None
        else:
            volume = VOLUMES[b % 6]
            if volume in world.busy or any(d.volume == volume for d in world.drives.values()):
                return
            world.busy.add(volume)
            world.drives[drive].busy, world.drives[drive].volume = True, volume
            chooser.sessions.of(drive).begin_tour(
                Running(volume, QUEUES[c % 3], 0, world.now + 1000)
            )
            world.ledger.record(volume, world.now)
        world.touched.add(volume)
    elif kind == "drive":
        drive = world.drives[("d1", "d2", "d3")[a % 3]]
        if b % 3 == 0:
            drive.cleaning_due = not drive.cleaning_due
        elif b % 3 == 1 and not drive.busy:
            drive.volume = None  # dismounted
        else:
            drive.enabled = not drive.enabled
    elif kind == "unavailable":
        world.unavailable ^= {VOLUMES[a % 6]}
    elif kind == "resync":
        fresh = Planner()
        fresh.add(Entry(**{f: getattr(e, f) for f in e.__slots__})
                  for t in world.planner.tapes.values() for e in t.entries.values())  # fmt: skip
        world.planner.begin_resync()
        world.planner.replace(fresh)


def same(verdict: Verdict) -> tuple[Any, ...]:
    """A verdict less what changes with time alone: an overdue tape's age in its key."""
    key = verdict.key[2:] if verdict.key[:1] == (0.0,) else verdict.key
    return (verdict.volume, verdict.rule, verdict.priority, verdict.service_s,
            verdict.mount_s, verdict.queues, verdict.queue, key)  # fmt: skip


@dataclass
class WorldClock:
    """The world's clock (it moves only when an op says so)."""

    world: World

    def now(self) -> float:
        return self.world.now

    async def sleep(self, seconds: float) -> None:
        self.world.now += max(seconds, 0.0)

    def wall(self) -> datetime:
        return datetime.fromtimestamp(self.world.now, UTC)


OPS = st.tuples(
    st.sampled_from(("add", "add", "take", "time", "time", "queue", "session", "session",
                     "drive", "unavailable", "resync")),
    st.integers(0, 50), st.integers(0, 50), st.integers(0, 50),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=40))
def test_incremental_plan_is_the_full_ranking(ops: list[tuple[Any, ...]]) -> None:
    world = World()
    incremental = world.chooser(incremental=True)
    full = world.chooser(incremental=False)
    for op in ops:
        apply(world, incremental, op)
        full.queues = incremental.queues  # and the sessions, shared by the world
        plan = incremental.plan(world.busy, world.mountable, world.touched)
        world.touched = set()
        walked = list(plan.walk)
        urgent = plan.urgent_after(set())
        mounted = plan.mounted
        plan.close()
        ranked = full.rank(world.busy, world.mountable)
        assert [same(v) for v in walked] == [same(v) for v in ranked]
        assert [v.volume for v in urgent] == [v.volume for v in ranked if v.priority > 0]
        assert mounted == sum(1 for v in ranked if not v.mount_s)
        # Held tapes keep the rule the full ranking names (tape_unavailable aside: not cached).
        for volume, verdict in full.verdicts.items():
            if verdict.rule and verdict.rule != "tape_unavailable":
                assert same(incremental.verdicts[volume]) == same(verdict)
        assert incremental.starts == full.starts


def test_a_walk_pops_only_what_it_is_asked_for_and_puts_it_back() -> None:
    world = World()
    world.planner.add(
        Entry(i, VOLUMES[i % 6], i, 10 * GB, 0, "default", world.now - 100) for i in range(1, 61)
    )
    chooser = world.chooser(incremental=True)
    plan = chooser.plan(set(), world.mountable, set())
    assert chooser.ranking.scored == 6
    first = next(iter(plan.walk))
    plan.close()
    again = chooser.plan(set(), world.mountable, set())
    assert chooser.ranking.scored == 0  # nothing changed: nothing scored again
    assert next(iter(again.walk)).volume == first.volume
    again.close()
    world.planner.take([6])  # one tape's queue changes: only it is scored again
    chooser.plan(set(), world.mountable, set()).close()
    assert chooser.ranking.scored == 1


def test_a_tape_held_by_its_mount_budget_comes_back_when_the_day_has_passed() -> None:
    world = World()
    world.planner.add([Entry(1, "A", 1, 10 * GB, 0, "default", world.now - 6000)])
    world.ledger.record("A", world.now - 100)
    world.ledger.record("A", world.now - 50)
    chooser = world.chooser(incremental=True)
    chooser.plan(set(), world.mountable, set()).close()
    assert chooser.verdicts["A"].rule == "mount_budget"  # overdue, and held
    world.now += 86_400 - 100
    plan = chooser.plan(set(), world.mountable, set())
    assert [v.volume for v in plan.walk] == ["A"]
    plan.close()

"""Staggered bulk sessions while a queue has a latency target (``scheduler/stagger.py``):
alike sessions started together get ends spread over one session; a session whose end
is clear of the others', an urgent one, a tape split once, the campaign's end and a
configuration without targets are left alone; a stopped session yields and its tape is
then ranked as not mounted."""

from __future__ import annotations

from types import SimpleNamespace

from tests.unit.test_sched_tiers import SetClock
from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.db.memory import MemoryStore
from tssd.scheduler.choose import Chooser, Running
from tssd.scheduler.context import QueuePolicy
from tssd.scheduler.cost import Verdict
from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger
from tssd.scheduler.stagger import stagger_end
from tssd.scheduler.tiers import PriorityTiers

GB = 10**9


def test_sessions_started_together_end_a_spacing_apart() -> None:
    ends: list[float] = []
    for _ in range(4):
        stop = stagger_end(0.0, 4000.0, ends, 4)
        ends.append(4000.0 if stop is None else stop)
    assert sorted(ends) == [1000.0, 2000.0, 3000.0, 4000.0]


def test_an_end_clear_of_the_others_or_no_room_left_is_not_split() -> None:
    assert stagger_end(0.0, 4000.0, [2000.0, 3000.0], 4) is None  # clear by 1000 s
    assert stagger_end(0.0, 4000.0, [4000.0], 1) is None  # one drive: nothing to spread
    # Within a quarter of a spacing (250 s) of another end it stops a spacing before it.
    assert stagger_end(0.0, 4000.0, [3800.0], 4) == 2800.0
    assert stagger_end(0.0, 4000.0, [3700.0], 4) is None
    # Every moment a spacing after now is taken: run it through.
    assert stagger_end(0.0, 4000.0, [1000.0, 2000.0, 3000.0, 4000.0], 4) is None


def verdict(volume: str, service_s: float) -> Verdict:
    return Verdict(volume, "", 0, service_s, 200.0, (), frozenset({"bulk"}), "bulk")


def chooser(*, targets: bool = True, queued: int = 20) -> Chooser:
    clock = SimpleNamespace(now=lambda: 0.0)
    drives = SimpleNamespace(
        drives={f"d{i}": SimpleNamespace(enabled=True) for i in range(4)},
        free=list, ledger=MountLedger(),
    )  # fmt: skip
    queue = MemoryStore()
    made = Chooser(SchedulerSettings(), queue.scheduling, queue.queue_settings, drives, LTO9, clock)
    made.queues = {"urgent": QueuePolicy(latency_target_s=3600.0 if targets else None)}
    made.verdicts = {f"T{i}": verdict(f"T{i}", 4000.0) for i in range(queued)}
    planner = Planner()
    planner.add([Entry(i, f"V{i}", 1, GB, 0, "bulk", 0.0) for i in range(8)])
    made.planner = planner
    return made


def test_a_bulk_session_colliding_with_another_stops_early_once() -> None:
    made = chooser()
    made.sessions.of("d0").begin_tour(Running("V0", "bulk", 0, 4000.0))
    assert made.started("d1", "V1", "bulk", 0, 4000.0) == 3000.0
    assert made.running["d1"].until == 3000.0  # the plan sees the drive free then
    made.ended("d1")
    assert "V1" in made.split  # its rest: an ordinary tape, ranked as not mounted
    made.sessions.of("d1").begin_tour(Running("V2", "bulk", 0, 3000.0))
    assert made.started("d2", "V1", "bulk", 0, 4000.0) is None  # split once only
    assert "V1" not in made.split


def test_no_stagger_without_a_target_for_urgent_work_or_near_the_end() -> None:
    for made, priority in ((chooser(targets=False), 0), (chooser(), 5), (chooser(queued=3), 0)):
        made.sessions.of("d0").begin_tour(Running("V0", "bulk", 0, 4000.0))
        assert made.started("d1", "V1", "bulk", priority, 4000.0) is None
        assert made.running["d1"].until == 4000.0
        made.ended("d1")
        assert not made.split


def test_a_session_past_its_stop_yields() -> None:
    clock = SetClock(100.0)
    tiers = PriorityTiers(DriveSessions({}, clock))
    tiers.sessions.of("d1").begin_recall(0, 500.0)
    assert not tiers.interrupted("d1", "V1")
    clock.at = 500.0
    assert tiers.interrupted("d1", "V1") and "d1" in tiers.yielding
    tiers.sessions.of("d1").ended()
    assert not tiers.interrupted("d1", "V1")

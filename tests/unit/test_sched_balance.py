"""Ending the drives together after staggered sessions (``scheduler/balance.py``): list
scheduling as the plan does it, McNaughton's wrap-around case of two drives free at
different times, no pre-read where the drives already end together or where the latest
end is a running session's, and the chooser putting the pre-read tape first and stopping
its session after the pre-read, only near the end and only while a queue has a target."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.db.memory import MemoryStore
from tssd.scheduler.balance import list_schedule, overshoot, pre_read
from tssd.scheduler.choose import Chooser, Plan, Running
from tssd.scheduler.context import QueuePolicy
from tssd.scheduler.cost import Verdict
from tssd.scheduler.planner import Planner


def test_list_scheduling_gives_each_session_to_the_drive_free_first() -> None:
    plan, ends = list_schedule([0.0, 500.0], [1000.0, 200.0, 300.0])
    assert plan == [(0.0, 1000.0), (500.0, 700.0), (700.0, 1000.0)]
    assert sorted(ends) == [1000.0, 1000.0]
    # A session released later waits for its moment even on a free drive.
    plan, _ = list_schedule([0.0], [100.0], [250.0])
    assert plan == [(250.0, 350.0)]


def test_a_drive_freeing_early_reads_first_what_would_end_the_last_drive_late() -> None:
    # Drives free at 0 s and 5,000 s, two tapes of 10,000 s: taken whole they end at
    # 10,000 s and 15,000 s; balanced, both end at 12,500 s.
    assert pre_read(0.0, [5000.0], [10000.0, 10000.0], 2, 100.0) == (1, 2500.0)
    # After the pre-read (2,500 s and a 50 s mount) the first tape goes to the same drive.
    plan, ends = list_schedule([2550.0, 5000.0], [10000.0, 7500.0], [0.0, 2550.0])
    assert max(ends) == 12550.0 and plan[1] == (5000.0, 12500.0)


def test_no_pre_read_where_nothing_ends_late_or_a_running_session_ends_last() -> None:
    assert pre_read(0.0, [0.0], [10000.0, 10000.0], 2, 100.0) is None  # they end together
    assert pre_read(0.0, [30000.0], [10000.0, 10000.0], 2, 100.0) is None  # set by the run
    assert pre_read(0.0, [5000.0], [10000.0, 10000.0], 2, 6000.0) is None  # not worth it
    assert pre_read(0.0, [], [], 2, 100.0) is None
    assert pre_read(0.0, [], [10000.0], 1, 100.0) is None  # one drive: nothing to share


@given(
    st.lists(st.floats(0, 20000), max_size=4),
    st.lists(st.floats(1, 20000), min_size=1, max_size=6),
    st.integers(2, 5),
    st.floats(1, 1000),
)
def test_a_pre_read_fits_before_the_rest_is_taken_and_lowers_the_overshoot(
    others: list[float], queued: list[float], drives: int, margin: float
) -> None:
    others = others[: drives - 1]
    chosen = pre_read(0.0, others, queued, drives, margin)
    if chosen is None:
        return
    index, seconds = chosen
    free = [0.0, *others] + [0.0] * (drives - 1 - len(others))
    plan, ends = list_schedule(free, queued)
    balanced = (sum(free) + sum(queued)) / drives
    done = margin / 2 + seconds
    assert seconds > margin and queued[index] - seconds > margin
    assert plan[index][0] >= done  # the rest is not wanted before the pre-read ends
    rest = [q - seconds if i == index else q for i, q in enumerate(queued)]
    released = [done if i == index else 0.0 for i in range(len(rest))]
    _, after = list_schedule([done, *free[1:]], rest, released)
    assert max(after) <= max(ends)
    assert overshoot(after, balanced) <= overshoot(ends, balanced) - margin


def verdict(volume: str, service_s: float, priority: int = 0) -> Verdict:
    return Verdict(volume, "", priority, service_s, 200.0, (), frozenset({"bulk"}), "bulk")


def chooser(verdicts: list[Verdict], *, targets: bool = True) -> Chooser:
    clock = SimpleNamespace(now=lambda: 0.0)
    drives = SimpleNamespace(
        drives={f"d{i}": SimpleNamespace(enabled=True) for i in range(2)}, free=list
    )
    queue = MemoryStore()
    made = Chooser(SchedulerSettings(), queue.scheduling, queue.queue_settings, drives, LTO9, clock)
    made.queues = {"urgent": QueuePolicy(latency_target_s=3600.0 if targets else None)}
    made.verdicts = {v.volume: v for v in verdicts}
    made.planner = Planner()
    made.sessions.of("d1").begin_tour(Running("R", "bulk", 0, 5000.0))
    return made


def context(made: Chooser) -> SimpleNamespace:
    return SimpleNamespace(now=0.0, free=("d0",), targets=made.targets())


def test_the_chooser_puts_the_pre_read_tape_first_and_stops_it_after_the_pre_read() -> None:
    # Less than a session per drive queued (19,000 s against 2 x 10,000 s): the end.
    tapes = [verdict("A", 10000.0), verdict("B", 9000.0)]
    made = chooser(tapes)
    plan = made._balanced(Plan.of(tapes), context(made))  # type: ignore[arg-type]
    assert [v.volume for v in plan.walk] == ["B", "A"]
    margin = 2 * (LTO9.mount_s() + LTO9.typical_unload_rewind_s() + LTO9.unload_s + LTO9.robot_s)
    seconds = made.pre_reads["B"]
    assert seconds == 14000.0 - 12000.0 > margin  # B's planned end minus the balanced end
    stop = made.started("d0", "B", "bulk", 0, 10000.0)
    assert stop == LTO9.mount_s() + seconds
    assert made.running["d0"].until == stop and "B" not in made.pre_reads


def test_no_pre_read_without_a_target_with_urgent_work_or_far_from_the_end() -> None:
    tapes = [verdict("A", 10000.0), verdict("B", 9000.0)]
    cases = (
        (chooser(tapes, targets=False), tapes),
        (chooser([*tapes, verdict("U", 100.0, 10)]), [*tapes, verdict("U", 100.0, 10)]),
        (chooser([*tapes, *(verdict(f"T{i}", 10000.0) for i in range(3))]), tapes),
    )
    for made, walk in cases:
        plan = made._balanced(Plan.of(walk), context(made))  # type: ignore[arg-type]
        assert [v.volume for v in plan.walk] == [v.volume for v in walk]
        assert not made.pre_reads

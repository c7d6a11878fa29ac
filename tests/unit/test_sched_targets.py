"""A queue's latency target in the scheduler's cost model: a tape whose plan would miss
the target becomes urgent work (and stays so until served); without targets nothing
changes. The simulated effect is in docs/scheduling.md."""

from __future__ import annotations

from dataclasses import replace

from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.scheduler.cost import Context, QueuePolicy, evaluate, target_deadline
from tssd.scheduler.planner import Entry, Planner

GB = 10**9


def tape(queue: str, arrived: float, n: int = 3, priority: int = 0) -> Planner:
    planner = Planner()
    planner.add([Entry(i, "A", i, GB, priority, queue, arrived) for i in range(1, n + 1)])
    return planner


def context(**kw: object) -> Context:
    base = Context(
        now=1000.0, settings=SchedulerSettings(urgent_batch_s=1800.0), profile=LTO9,
        queues={"fast": QueuePolicy(latency_target_s=3600.0)}, mounted=frozenset(),
        queue_drives={}, mounts_today=lambda v: 0,
    )  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


def test_deadline_is_the_earliest_arrival_plus_its_queue_target() -> None:
    planner = tape("fast", 100.0)
    planner.add([Entry(9, "A", 9, GB, 0, "slow", 0.0)])
    assert target_deadline(planner.tapes["A"], {"fast": 3600.0}) == 3700.0
    assert target_deadline(planner.tapes["A"], {}) == float("inf")


def test_a_tape_that_would_miss_its_target_is_urgent_at_once() -> None:
    a = tape("fast", 0.0).tapes["A"]
    targets = {"fast": 3600.0}
    # At 2000 s its oldest request waited past urgent_batch_s: no batching wait left.
    on_time = evaluate(a, context(now=2000.0, targets=targets, starts={"A": 2000.0}))
    assert (on_time.priority, on_time.late) == (0, False)
    late = evaluate(a, context(now=2000.0, targets=targets, starts={"A": 3500.0}))
    assert (late.priority, late.late) == (1, True)
    # Promoted, its planned start moves up: it stays urgent while its requests wait.
    sticky = evaluate(
        a, context(now=2000.0, targets=targets, starts={"A": 2000.0}, late=frozenset("A"))
    )
    assert sticky.late and sticky.priority == 1
    # Before then it batches (ranked as ordinary work, first among it): the wait ends
    # at 1800 s, before it must start (3600 s minus its session) to meet its deadline.
    batching = evaluate(a, context(targets=targets, starts={"A": 3500.0}))
    assert batching.late and batching.priority == 0
    # Without targets the verdict is the one of before (no target, no change).
    plain = evaluate(a, context(queues={}, starts={"A": 3500.0}))
    assert plain == evaluate(a, context(queues={}))
    assert not plain.late


def test_a_deadline_before_the_batching_wait_ends_skips_it() -> None:
    a = tape("fast", 900.0, priority=5).tapes["A"]  # urgent, arrived 100 s ago
    batching = evaluate(a, context())  # within urgent_batch_s: ranks as ordinary work
    assert (batching.priority, batching.key[2]) == (0, 0.0)
    # Deadline 1900 s: it must start by about 1700 s, the wait would end at 2700 s.
    late = evaluate(a, context(targets={"fast": 1000.0}, starts={"A": 1800.0}))
    assert late.late and late.priority == 5 and late.key[2] == -5.0


def test_a_paused_queue_target_makes_nothing_urgent() -> None:
    planner = tape("fast", 0.0)
    planner.add([Entry(9, "A", 9, GB, 0, "bulk", 0.0)])
    queues = {"fast": QueuePolicy(paused=True, latency_target_s=3600.0)}
    verdict = evaluate(
        planner.tapes["A"], context(queues=queues, targets={"fast": 3600.0}, starts={"A": 9e9})
    )
    assert not verdict.late and verdict.priority == 0


def test_oldest_per_queue_follows_adds_and_removes() -> None:
    import random

    rng = random.Random(7)
    planner = Planner()
    live: dict[int, Entry] = {}
    for i in range(1, 400):
        if live and rng.random() < 0.4:
            gone = rng.choice(sorted(live))
            planner.take([gone])
            del live[gone]
        else:
            e = Entry(i, "A", rng.randint(1, 50), GB, 0, rng.choice("xyz"), rng.uniform(0, 100))
            planner.add([e])
            live[i] = e
        queue_tape = planner.tapes.get("A")
        for q in "xyz":
            want = min((e.arrived for e in live.values() if e.queue == q), default=float("inf"))
            got = queue_tape.oldest_in(q) if queue_tape is not None else float("inf")
            assert got == want, (i, q)

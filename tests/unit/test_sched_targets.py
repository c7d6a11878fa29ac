"""A queue's latency target in the scheduler's cost model: a tape whose plan would miss
the target becomes urgent work (and stays so until served); without targets nothing
changes. The simulated effect is in docs/scheduling.md."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tssd.backends.sim.profiles import LTO9, get_profile
from tssd.config import SchedulerSettings
from tssd.config.queues import QueueSettings
from tssd.db.memory import MemoryStore
from tssd.scheduler.choose import Chooser, Running
from tssd.scheduler.cost import (
    Context,
    QueuePolicy,
    Verdict,
    evaluate,
    handover_s,
    target_deadline,
)
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger
from tssd.simulate.campaign import Arrival
from tssd.simulate.runner import Options, run_campaign
from tssd.simulate.vloop import run_virtual

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
    # Late, it does not wait for company, even where the next drive to change tapes
    # would still reach it in time: the plan says that drive goes to other tapes first.
    late_now = evaluate(a, context(targets=targets, starts={"A": 3500.0}, next_free=2000.0))
    assert late_now.late and late_now.priority == 1
    due = evaluate(a, context(targets=targets, starts={"A": 3500.0}, next_free=3500.0))
    assert due.late and due.priority == 1
    # On time, an urgent tape waits for company (ranked as ordinary work) while the next
    # drive to change tapes would still reach its requests before the deadline.
    urgent = tape("fast", 900.0, priority=5).tapes["A"]
    waits = evaluate(urgent, context(targets=targets, starts={"A": 1000.0}, next_free=2000.0))
    assert not waits.late and waits.priority == 0
    goes = evaluate(urgent, context(targets=targets, starts={"A": 1000.0}, next_free=4400.0))
    assert not goes.late and goes.priority == 5
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


# --- reaching the target-bearing requests, and preempting only at the last moment ------


def test_lateness_weighs_reaching_the_target_requests_not_the_whole_session() -> None:
    planner = tape("bulk", 0.0, n=600)  # a long session of ordinary work...
    planner.add([Entry(999, "A", 999, GB, 0, "fast", 900.0)])  # ...and one target request
    a = planner.tapes["A"]
    ctx = context(now=1000.0, targets={"fast": 3600.0})
    verdict = evaluate(a, replace(ctx, starts={"A": 2000.0}))
    # The whole session would end after the deadline...
    assert 2000.0 + verdict.service_s > 4500.0 and verdict.deadline == 4500.0
    assert verdict.reach_s < 600.0  # a mount and one file
    assert not verdict.late  # 2000 s + reaching it is before 4500 s
    late = evaluate(a, replace(ctx, starts={"A": 4400.0}))
    assert late.late


def test_late_tapes_rank_by_their_last_moment_to_start() -> None:
    early = tape("fast", 0.0, n=1, priority=5).tapes["A"]
    later_planner = Planner()
    later_planner.add([Entry(50, "B", 1, GB, 5, "fast", 500.0)])
    later = later_planner.tapes["B"]
    ctx = context(now=3000.0, targets={"fast": 3600.0}, late=frozenset({"A", "B"}))
    keys = [evaluate(t, ctx).key for t in (later, early)]
    assert min(keys) == keys[1]  # A's deadline (3600 s) before B's (4100 s)


#: A profile whose rewind on unload follows the head (no published steps): the tape a
#: drive unloads may take up to a full rewind, 50 s more than the half the plan counts.
T10K = get_profile("gridka-t10k")


def test_the_handover_is_what_the_plan_leaves_out_of_the_unload() -> None:
    assert handover_s(T10K) == pytest.approx(T10K.rewind_full_s / 2) == 50.0
    # LTO-9 plans every unload with IBM's last step, which any mount that locates takes.
    assert handover_s(LTO9) == 0.0


def chooser(now: float, starts: dict[str, float], running: dict[str, Running]) -> Chooser:
    clock = SimpleNamespace(now=lambda: now)
    drives = SimpleNamespace(drives={}, free=list, ledger=MountLedger())
    settings = SchedulerSettings(preempt_after_s=14400.0)
    queue = MemoryStore()
    made = Chooser(settings, queue.scheduling, queue.queue_settings, drives, T10K, clock)
    made._starts = starts
    for drive, run in running.items():
        made.sessions.of(drive).begin_tour(run)
    made.planner = tape("fast", 0.0, n=1, priority=5)
    return made


def waiting(deadline: float = 3600.0, reach: float = 300.0) -> Verdict:
    return Verdict("A", "", 5, 300.0, 200.0, (), frozenset({"fast"}), "fast", True,
                   deadline, reach)  # fmt: skip


def bulk_sessions() -> dict[str, Running]:
    return {"d1": Running("X", "bulk", 0, 9000.0), "d2": Running("Y", "bulk", 0, 20000.0)}


def never_urgent(drive: str) -> int:
    return 0


@pytest.mark.parametrize(
    ("now", "start", "yields"),
    [
        (3400.0, 9000.0, ["d2"]),  # at its last moment, no drive frees in time: the one
        # with most work left yields
        (2000.0, 9000.0, []),  # not yet: a drive may free, later requests may join
        (3200.0, 9000.0, []),  # nor within the longest handover (50 s here) of it
        (3250.0, 9000.0, ["d2"]),
        (3400.0, 3250.0, ["d2"]),  # a plan of a drive free by now: a session overran
        (3700.0, 9000.0, []),  # the deadline passed: preempting no longer meets it
    ],
)
def test_a_target_preempts_only_at_its_last_moment(
    now: float, start: float, yields: list[str]
) -> None:
    made = chooser(now, {"A": start}, bulk_sessions())
    assert made.preempt([waiting()], frozenset(), never_urgent) == yields


def test_a_drive_already_yielding_serves_the_target_and_urgent_sessions_never_yield() -> None:
    made = chooser(3400.0, {"A": 9000.0}, bulk_sessions())
    assert made.preempt([waiting()], frozenset({"d9"}), never_urgent) == []
    assert made.preempt([waiting()], frozenset(), lambda d: 5) == []


def test_a_target_bearing_file_is_read_by_its_deadline_not_urgent_within_s_late() -> None:
    from tests.unit.test_sched_tiers import SetClock
    from tssd.scheduler.drive_session import DriveSessions
    from tssd.scheduler.tiers import PriorityTiers

    tiers = PriorityTiers(
        DriveSessions({}, SetClock(3500.0)),
        urgent_within_s=300.0, urgent_target_s=6000.0, queue_targets=lambda: {"fast": 3600.0},
    )  # fmt: skip
    fast = Entry(1, "A", 1, GB, 5, "fast", 0.0)
    assert tiers.read_within(fast) == 100.0  # its deadline, though urgent_within_s is 300
    fast.arrived = -500.0
    assert tiers.read_within(fast) == 0.0  # passed: read first
    other = Entry(2, "A", 2, GB, 5, "other", 0.0)
    assert tiers.read_within(other) == 2500.0  # urgent_target_s after arrival
    other.arrived = -6000.0
    assert tiers.read_within(other) == 300.0  # and at least urgent_within_s


def test_the_scheduler_wakes_at_the_next_last_moment_of_a_target() -> None:
    """Passes come on events and every ``tick_s``: a last moment between two passes was
    acted on up to a tick late. The chooser names the next one ahead (deadline minus
    reaching the tape minus the longest handover, 50 s here) for the loop to wake."""
    made = chooser(3000.0, {}, bulk_sessions())
    made.verdicts = {
        "A": waiting(deadline=3600.0, reach=300.0),  # last moment 3250 s
        "B": replace(waiting(deadline=5000.0, reach=300.0), volume="B"),  # 4650 s
        "C": replace(waiting(deadline=3300.0, reach=300.0), volume="C"),  # 2950 s: passed
        "D": replace(waiting(), volume="D", deadline=float("inf")),  # no target request
    }
    assert made.next_last_moment() == float("inf")  # no queue has a target: never
    made.queues = {"fast": QueuePolicy(latency_target_s=3600.0)}
    assert made.next_last_moment() == pytest.approx(3250.0)
    del made.verdicts["A"]
    assert made.next_last_moment() == pytest.approx(4650.0)


def test_a_session_reads_every_queue_unless_a_drive_limit_keeps_one_out() -> None:
    a = tape("bulk", 0.0).tapes["A"]
    # No queue lacks room: the session may read any queue's requests, also those of a
    # queue that arrive for the tape while it is read (None), not only the tape's queues
    # at its start.
    assert evaluate(a, context()).queues is None
    full = {"bulk": QueuePolicy(max_drives=1), "fast": QueuePolicy(latency_target_s=3600.0)}
    planner = tape("bulk", 0.0)
    planner.add([Entry(9, "A", 9, GB, 0, "fast", 0.0)])
    limited = evaluate(planner.tapes["A"], context(queues=full, queue_drives={"bulk": 1}))
    assert limited.queues == frozenset({"fast"})


def test_an_urgent_request_for_the_tape_being_read_is_read_by_its_deadline() -> None:
    """One drive reads a long bulk tape (queue ``default``); a request of queue ``urgent``
    (target 1 h) for a file at the tape's end arrives 10 minutes in. Before the fix the
    session kept to the queues its tape held when it started: the urgent request was not
    claimed into it and waited for the session's end (about 5,000 s)."""
    files = 200
    rows = ["pnfsid,volume,seq,size,storage_class,written_at"] + [
        f"F{i:04d},T0,{i},{10 * GB},atlas:tape,2019-01-01T00:00:01+00:00"
        for i in range(1, files + 2)
    ]
    arrivals = [Arrival(i - 1, f"F{i:04d}", 0.0) for i in range(1, files + 1)]
    arrivals.append(Arrival(files, f"F{files + 1:04d}", 600.0, 10, "urgent"))
    # ``given`` as a ``[[queues]]`` table gives it: the target is seeded into the table.
    urgent = QueueSettings("urgent", latency_target_s=3600.0, given=frozenset({"latency_target_s"}))
    options = Options(catalog=Path("unused"), requests=Path("unused"), drives=1, queues=(urgent,))
    outcome = run_virtual(lambda: run_campaign(options, arrivals, "\n".join(rows) + "\n"))
    done = outcome.finished_at[outcome.request_of[files]]
    assert outcome.makespan_s > 600.0 + 3600.0  # the session outlasts the deadline
    assert done <= 600.0 + 3600.0
    assert [(m.volume, m.files) for m in outcome.mounts] == [("T0", files + 1)]


def test_a_tape_unloaded_for_another_session_is_free_for_the_next_drive() -> None:
    """Drive B reads T0's one file, then unloads T0 for T2 (a long session, waiting since
    100 s); a request for T0 arrives at 3,000 s. Drive A, freed by T1 long before T2
    ends, reads it (3,282 s). Before the fix the scheduler kept T0 reserved through B's
    whole T2 session: the request waited for that session's end (11,501 s). Found on
    the trickle campaign, where a tape visited for an urgent file and then swapped out
    could not be visited again for hours."""
    rows = ["pnfsid,volume,seq,size,storage_class,written_at"]
    arrivals: list[Arrival] = []

    def tape_of(volume: str, files: int, at: float) -> None:
        for i in range(1, files + 1):
            pnfsid = f"A{volume[1]}{i:04X}"  # hex, as pnfsids are
            rows.append(f"{pnfsid},{volume},{i},{10 * GB},a:t,2019-01-01T00:00:01+00:00")
            arrivals.append(Arrival(len(arrivals), pnfsid, at))

    tape_of("T0", 2, 0.0)
    tape_of("T1", 100, 0.0)
    tape_of("T2", 400, 100.0)  # waits for a drive: T0 is still in it when it gets one
    arrivals[1] = replace(arrivals[1], at=3000.0)  # T0's second file
    arrivals = [replace(a, index=i) for i, a in enumerate(sorted(arrivals, key=lambda a: a.at))]
    late = next(a for a in arrivals if a.pnfsid == "A00002")
    options = Options(catalog=Path("unused"), requests=Path("unused"), drives=2)
    outcome = run_virtual(lambda: run_campaign(options, arrivals, "\n".join(rows) + "\n"))
    done = outcome.finished_at[outcome.request_of[late.index]]
    t1 = next(m for m in outcome.mounts if m.volume == "T1")
    assert t1.ended is not None and t1.ended < outcome.makespan_s  # T2 reads on after T1
    assert done < outcome.makespan_s - 3600  # by the drive T1 freed, not after T2's session
    assert [m.volume for m in outcome.mounts].count("T0") == 2

"""The planner's per-tape index, the cost model's rules, copy set cover and RAO."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from tssd.backends.base import ReadItem, TapeCopy
from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.files import CountingSink
from tssd.scheduler.context import Context, QueuePolicy
from tssd.scheduler.copies import cover_copies
from tssd.scheduler.cost import evaluate
from tssd.scheduler.drives import DriveState
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger
from tssd.scheduler.rao import locate_total, order_reads

GB = 10**9
T0 = datetime(2020, 1, 1, tzinfo=UTC)


def entry(i: int, volume: str = "A", position: int | None = None, **kw: object) -> Entry:
    fields: dict[str, object] = {"size": GB, "priority": 0, "queue": "default", "arrived": 0.0}
    fields.update(kw)
    return Entry(i, volume, i if position is None else position, **fields)  # type: ignore[arg-type]


def test_aggregates_follow_adds_and_takes() -> None:
    planner = Planner()
    planner.add([entry(1), entry(2), entry(4), entry(5, priority=3, arrived=-10.0)])
    tape = planner.tapes["A"]
    assert (len(tape), tape.bytes, tape.runs) == (4, 4 * GB, 2)
    assert tape.oldest() == -10.0 and tape.max_priority() == 3
    planner.add([entry(3)])  # bridges the two runs
    assert tape.runs == 1
    assert [e.id for e in planner.take([5, 3, 99])] == [5, 3]
    assert (tape.runs, tape.max_priority(), tape.oldest()) == (2, 0, 0.0)
    planner.take([1, 2, 4])
    assert "A" not in planner.tapes and len(planner) == 0


def test_resync_keeps_arrivals_and_drops_what_was_taken_meanwhile() -> None:
    planner = Planner()
    planner.add([entry(1, arrived=5.0), entry(2, arrived=6.0)])
    planner.begin_resync()
    planner.take([2])  # claimed while the resync query ran
    planner.finish_resync([entry(1, arrived=100.0), entry(2), entry(3, volume="B")])
    assert planner.get(1) is not None and planner.get(1).arrived == 5.0  # type: ignore[union-attr]
    assert 2 not in planner and 3 in planner


def context(**settings: object) -> Context:
    return Context(
        now=1000.0,
        settings=SchedulerSettings(**settings),  # type: ignore[arg-type]
        profile=LTO9,
        queues={"paused": QueuePolicy(paused=True), "one": QueuePolicy(max_drives=1)},
        mounted=frozenset(),
        queue_drives={"one": 1},
        mounts_today=lambda v: 5 if v == "WORN" else 0,
    )


def tape(volume: str, n: int, **kw: object) -> Planner:
    planner = Planner()
    planner.add([entry(i, volume, **kw) for i in range(1, n + 1)])
    return planner


def test_rules_hold_tapes_by_name() -> None:
    ctx = context(fill_wait_s=600.0, mount_budget_per_day=5, fill_files=50, fill_bytes=10**15)
    verdict = evaluate(tape("A", 3, arrived=900.0).tapes["A"], ctx)
    assert verdict.rule == "fill_wait"
    assert evaluate(tape("A", 3, arrived=0.0).tapes["A"], ctx).rule == ""  # waited long enough
    assert evaluate(tape("A", 60).tapes["A"], ctx).rule == ""  # enough files
    assert evaluate(tape("WORN", 60).tapes["WORN"], ctx).rule == "mount_budget"
    assert evaluate(tape("A", 60, queue="paused").tapes["A"], ctx).rule == "queue_paused"
    assert evaluate(tape("A", 60, queue="one").tapes["A"], ctx).rule == "max_drives"


def test_order_aging_then_priority_then_longest() -> None:
    ctx = context(max_wait_s=500.0, fill_wait_s=0.0)
    old = evaluate(tape("OLD", 5, arrived=0.0).tapes["OLD"], ctx)
    strict = SchedulerSettings(max_wait_s=5000.0, fill_wait_s=0.0, urgent_batch_s=0.0)
    ctx = replace(ctx, settings=strict)
    urgent = evaluate(tape("HI", 5, priority=5, arrived=900.0).tapes["HI"], ctx)
    big = evaluate(tape("BIG", 400, arrived=900.0).tapes["BIG"], ctx)
    small = evaluate(tape("SMALL", 300, arrived=900.0).tapes["SMALL"], ctx)
    assert old.key < urgent.key < big.key < small.key


def test_urgent_tape_waits_for_company_then_goes_first() -> None:
    ctx = context(fill_wait_s=0.0)  # urgent_batch_s 1800 by default; now = 1000
    fresh = evaluate(tape("HI", 5, priority=5, arrived=900.0).tapes["HI"], ctx)
    bulk = evaluate(tape("BIG", 400, arrived=0.0).tapes["BIG"], ctx)
    # Not a strict class yet, so later urgent requests for HI share its mount; a tape with
    # little else on it ranks as the ordinary work it is ...
    assert fresh.priority == 0 and bulk.key < fresh.key
    # ... one worth a mount anyway leads the ordinary work: it serves them at no cost.
    planner = tape("MIX", 60, arrived=0.0)
    planner.add([entry(99, "MIX", priority=5, arrived=900.0)])
    mixed = evaluate(planner.tapes["MIX"], ctx)
    assert mixed.priority == 0 and mixed.key < bulk.key
    due = evaluate(tape("HI", 5, priority=5, arrived=-900.0).tapes["HI"], ctx)
    assert due.priority == 5 and due.key < fresh.key
    in_drive = replace(ctx, mounted=frozenset({"HI"}))  # no mount to share: no wait
    assert evaluate(tape("HI", 5, priority=5, arrived=900.0).tapes["HI"], in_drive).priority == 5


def copy(volume: str, position: int, day: int) -> TapeCopy:
    return TapeCopy("P", "b", volume, position, GB, None, None, T0 + timedelta(days=day))


def test_copy_choice_covers_the_pending_set_with_few_tapes() -> None:
    wanted = [
        [copy("A", 1, 0)],
        [copy("B", 1, 0)],
        [copy("A", 2, 0), copy("X", 1, 9)],  # A is needed anyway
        [copy("Y", 1, 1), copy("Z", 1, 2)],
        [copy("Z", 2, 2), copy("W", 1, 1)],  # Z covers both
        [],
    ]
    chosen = cover_copies(wanted, set())
    assert [c.volume if c else None for c in chosen] == ["A", "B", "A", "Z", "Z", None]
    assert cover_copies([[copy("Y", 1, 1), copy("Z", 1, 2)]], {"Z"})[0].volume == "Z"  # type: ignore[union-attr]


def test_rao_cuts_locate_time_of_sparse_reads() -> None:
    capacity = LTO9.capacity_bytes
    wrap = capacity // LTO9.wraps
    # Files at the end of wrap 0 and the start of wrap 1 sit close together; one in the
    # middle of wrap 0 is far from both.
    offsets = [wrap // 2, wrap - 2 * GB, wrap + GB, 3 * wrap - 2 * GB]
    items = [
        ReadItem(TapeCopy("P", "b", "A", i, GB, None, None, T0, offset=o), CountingSink())
        for i, o in enumerate(offsets)
    ]
    drive = DriveState("d", head_offset=wrap - GB)
    ordered = order_reads(items, drive, LTO9, "on")
    pairs = [(i.copy.offset, i.copy.size) for i in ordered]
    assert locate_total(pairs, drive.head_offset, LTO9) < locate_total(
        [(o, GB) for o in offsets], drive.head_offset, LTO9
    )
    assert order_reads(items, drive, LTO9, "off") == items


def test_mount_ledger_counts_a_sliding_day() -> None:
    ledger = MountLedger()
    for t in (0.0, 100.0, 200.0):
        ledger.record("A", t)
    assert ledger.count("A", 300.0) == 3
    assert ledger.free_at("A", 300.0, 3) == 86400.0
    assert ledger.count("A", 86450.0) == 2


def test_replace_takes_the_index_built_beside_less_what_was_taken() -> None:
    # Chooser.resync builds the new index a chunk per loop turn and swaps it in (issue 22).
    planner = Planner()
    planner.add([Entry(1, "A", 1, 10, 0, "q", 5.0), Entry(2, "A", 2, 10, 0, "q", 6.0)])
    planner.begin_resync()
    planner.take([2])  # a session claimed it while the resync's query ran
    fresh = Planner()
    fresh.add([Entry(i, v, 1 + i, 10, 0, "q", 9.0) for i, v in ((1, "A"), (2, "A"), (3, "B"))])
    planner.replace(fresh)
    assert len(planner) == 2 and 2 not in planner and 3 in planner
    assert set(planner.tapes) == {"A", "B"} and len(planner.tapes["A"]) == 1
    planner.take([1])
    assert set(planner.tapes) == {"B"}

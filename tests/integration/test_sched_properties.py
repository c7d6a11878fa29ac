"""Scheduler invariants over random small campaigns, run in the simulator (tssd policy)."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tssd.simulate.campaign import Arrival
from tssd.simulate.runner import Options, Outcome, run_campaign
from tssd.simulate.vloop import run_virtual

GB = 10**9
T0 = datetime(2020, 1, 1, tzinfo=UTC)
MAX_WAIT = 1500.0
BUDGET = 2


@st.composite
def campaigns(draw: st.DrawFn) -> tuple[str, list[Arrival], int]:
    tapes = draw(st.integers(1, 4))
    files = draw(st.integers(2, 12))
    rows = []
    for t in range(tapes):
        for seq in range(1, files + 1):
            size = draw(st.integers(GB // 10, 3 * GB))
            rows.append((f"{t:04X}{seq:08X}", f"V{t:04d}", seq, size, T0 + timedelta(hours=t)))
    dup = draw(st.lists(st.sampled_from(rows), max_size=4, unique=True))
    for i, row in enumerate(dup):
        rows.append((row[0], "D0000", i + 1, row[3], T0 + timedelta(days=50, minutes=i)))
    picked = draw(st.lists(st.sampled_from(rows[: tapes * files]), min_size=1, unique=True))
    arrivals = [
        Arrival(i, row[0], draw(st.sampled_from([0.0, 50.0, 900.0, 4000.0])),
                draw(st.sampled_from([0, 0, 5])), "default")
        for i, row in enumerate(picked)
    ]  # fmt: skip
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
    w.writerows([p, v, s, size, "atlas:tape", at.isoformat()] for p, v, s, size, at in rows)
    arrivals.sort(key=lambda a: (a.at, a.index))
    return out.getvalue(), arrivals, draw(st.integers(1, 3))


def simulate(catalog: str, arrivals: list[Arrival], drives: int, **overrides: object) -> Outcome:
    options = Options(
        catalog=Path("unused"), requests=Path("unused"), profile="lto9", drives=drives,
        scheduler=tuple(overrides.items()),
    )  # fmt: skip
    return run_virtual(lambda: run_campaign(options, arrivals, catalog))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(campaigns())
def test_invariants_over_random_campaigns(campaign: tuple[str, list[Arrival], int]) -> None:
    catalog, arrivals, drives = campaign
    outcome = simulate(
        catalog, arrivals, drives, rao="off", max_wait_s=MAX_WAIT, fill_wait_s=10**6,
        mount_budget_per_day=10**6 if drives == 3 else BUDGET, preempt_after_s=0.0,
    )  # fmt: skip
    mounts = outcome.mounts
    by_volume = exclusive_and_once(outcome, arrivals)
    # No tape mounted more often than its budget in any day.
    if drives != 3:
        for volume, spans in by_volume.items():
            starts = [s for s, _ in spans]
            assert all(sum(1 for t in starts if s <= t < s + 86400) <= BUDGET for s in starts), (
                volume
            )
    # Without RAO a pass never moves the head backwards.
    for m in mounts:
        passes = defaultdict(list)
        for n, pos in m.reads:
            passes[n].append(pos)
        assert all(p == sorted(p) for p in passes.values())
    # Aging: with enough drives for every tape, no request waits much beyond max_wait
    # although the fill wait alone would hold small tapes for days.
    if drives == 3 and len(by_volume) <= 3:
        longest = max((m.ended or outcome.makespan_s) - m.requested for m in mounts)
        for a in arrivals:
            waited = outcome.finished_at[outcome.request_of[a.index]] - a.at
            assert waited <= MAX_WAIT + 2 * longest + 300


def exclusive_and_once(outcome: Outcome, arrivals: list[Arrival]) -> dict[str, list[Any]]:
    """Never two drives on one tape at once; every request served exactly once."""
    by_volume = defaultdict(list)
    for m in outcome.mounts:
        by_volume[m.volume].append((m.requested, m.ended if m.ended is not None else 1e18))
    for spans in by_volume.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(spans))
    done = [r for r in outcome.requests if r.state == "done"]
    assert len(done) == len(arrivals) == len(outcome.finished_at)
    reads = [(m.volume, pos) for m in outcome.mounts for _, pos in m.reads]
    assert len(reads) == len(set(reads)) == len(arrivals)
    return by_volume


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(campaigns())
def test_rao_tours_and_urgent_visits_keep_the_invariants(
    campaign: tuple[str, list[Arrival], int],
) -> None:
    catalog, arrivals, drives = campaign
    outcome = simulate(
        catalog, arrivals, drives, rao="on", urgent_batch_s=300.0, urgent_target_s=600.0,
        preempt_after_s=3000.0, fill_wait_s=0.0,
    )  # fmt: skip
    exclusive_and_once(outcome, arrivals)

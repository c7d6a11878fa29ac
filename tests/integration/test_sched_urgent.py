"""Urgent recalls during bulk work, in the simulator: visits, batching and read-through."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tssd.simulate.campaign import Arrival
from tssd.simulate.runner import Options, Outcome, run_campaign
from tssd.simulate.vloop import run_virtual

GB = 10**9
T0 = datetime(2020, 1, 1, tzinfo=UTC)
FILES = 40


def catalog(tapes: str) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
    for t, volume in enumerate(tapes):
        for seq in range(1, FILES + 1):
            at = T0 + timedelta(hours=t, seconds=seq)
            w.writerow([f"{volume}{seq:04d}", volume, seq, 2 * GB, "atlas:tape", at.isoformat()])
    return out.getvalue()


def run(arrivals: list[Arrival], drives: int, **settings: object) -> Outcome:
    options = Options(
        catalog=Path("unused"), requests=Path("unused"), profile="lto9", drives=drives,
        scheduler=tuple(settings.items()),
    )  # fmt: skip
    return run_virtual(lambda: run_campaign(options, arrivals, catalog("ABC")))


def bulk(volume: str, first: int = 0, step: int = 2) -> list[Arrival]:
    """Every *step*-th file of *volume*, queued at 0."""
    return [
        Arrival(first + i, f"{volume}{seq:04d}", 0.0, 0, "default")
        for i, seq in enumerate(range(1, FILES + 1, step))
    ]


def test_a_visit_for_urgent_requests_leaves_ordinary_work_when_others_would_be_late() -> None:
    urgent = [
        Arrival(100, "A0002", 0.0, 10, "urgent"),
        Arrival(101, "B0004", 0.0, 10, "urgent"),
    ]
    arrivals = bulk("A", step=4) + bulk("B", 20) + bulk("C", 40) + urgent
    outcome = run(arrivals, 1, urgent_batch_s=0.0, urgent_target_s=100.0)
    sessions = [(m.volume, m.files) for m in outcome.mounts]
    # One drive: A's urgent file alone (A is the shorter), then B read through (nothing
    # else urgent waits), then the rest; each tape's ordinary work in one session.
    assert sessions[:2] == [("A", 1), ("B", 21)]
    assert sorted(v for v, files in sessions if files > 1) == ["A", "B", "C"]
    waits = {a.pnfsid: outcome.finished_at[outcome.request_of[a.index]] for a in urgent}
    assert max(waits.values()) < 600  # both served in the first minutes of a long campaign


def test_urgent_requests_for_one_tape_share_its_mount() -> None:
    urgent = [Arrival(100 + i, f"A{seq:04d}", 60.0 * i, 10, "urgent") for i, seq in
              enumerate((2, 10, 20))]  # fmt: skip
    outcome = run(bulk("B") + bulk("C", 20) + urgent, 2, urgent_batch_s=600.0)
    visits = [m for m in outcome.mounts if m.volume == "A"]
    # A holds nothing else: the first waited for company, one mount of A read all three.
    assert [m.files for m in visits] == [3]


def test_urgent_files_of_a_tape_read_through_join_its_single_pass() -> None:
    urgent = [Arrival(100, "A0040", 0.0, 10, "urgent"), Arrival(101, "A0024", 0.0, 10, "urgent")]
    arrivals = bulk("A") + urgent
    placed = run(arrivals, 1, urgent_batch_s=0.0)
    first = run(arrivals, 1, urgent_batch_s=0.0, urgent_within_s=0.0, urgent_target_s=0.0)
    for outcome in (placed, first):
        (mount,) = outcome.mounts
        # One pass over the tape: the urgent files joined the ordinary ones.
        assert mount.files == 22 and len({n for n, _ in mount.reads}) == 1
    urgent_positions = {24, 40}
    assert {p for _, p in first.mounts[0].reads[:2]} == urgent_positions
    # Placed in the tour where they cost least, before their deadline: less locating.
    assert placed.mounts[0].locate_s < first.mounts[0].locate_s
    assert {p for _, p in placed.mounts[0].reads[:2]} != urgent_positions

"""The lower bound of ``tssd simulate`` is a bound: never above the best schedule.

Small catalogs drawn by hypothesis are checked against an exhaustive search (one drive)
and against every policy of the real scheduler (one or two drives).

The best schedule of a tiny campaign comes from an exhaustive search on the simulated
library's cost model (tssd/simulate/exhaustive.py). The three shapes below each made the
previous bound exceed what a schedule achieves.
"""

from __future__ import annotations

import csv
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tssd.backends.sim.catalog_csv import CatalogRow
from tssd.simulate.bound import lower_bound
from tssd.simulate.campaign import Arrival, copies_by_pnfsid
from tssd.simulate.command import simulate
from tssd.simulate.exhaustive import best_makespan_s
from tssd.simulate.runner import Options
from tssd.tape.geometry import Profile, get_profile

T0 = datetime(2020, 1, 1, tzinfo=UTC)
LTO9 = get_profile("lto9")
WRAP = LTO9.capacity_bytes // LTO9.wraps
GB = 10**9


def catalog(rows: list[tuple[str, str, int, int]]) -> dict[str, list[CatalogRow]]:
    return copies_by_pnfsid(
        [
            CatalogRow(i, p, v, seq, size, "atlas:tape", T0)
            for i, (p, v, seq, size) in enumerate(rows)
        ]
    )


def check(arrivals: list[Arrival], copies: dict[str, list[CatalogRow]], profile: Profile) -> float:
    bound = lower_bound(arrivals, copies, profile, 1, 1).value
    best = best_makespan_s(arrivals, copies, profile)
    assert bound <= best + 1e-6, (bound, best)
    return best


def test_two_copies_on_one_tape_force_no_second_locate() -> None:
    """(a) A file with a copy at each end of a tape: reading the first copy needs no
    locate; the second copy's run must not be charged one."""
    copies = catalog([("A1", "V1", 1, 360 * GB), ("A2", "V1", 2, 36 * GB),
                      ("A2", "V1", 3, 36 * GB), ("A1", "V1", 4, 360 * GB)])  # fmt: skip
    arrivals = [Arrival(0, "A1", 0.0)]
    terms = lower_bound(arrivals, copies, LTO9, 1, 1)
    assert terms.locates == 0
    assert terms.must_tapes == 1
    best = check(arrivals, copies, LTO9)
    file_s = LTO9.per_file_s + LTO9.transfer_s(360 * GB)
    assert best == pytest.approx(LTO9.mount_s() + file_s)
    assert terms.value == pytest.approx(best)


def test_run_entered_past_a_file_read_from_another_tape() -> None:
    """(b) Run B1 C on V1 turns at BOT's end from wrap 1 onto wrap 2; B1 has a copy on
    V2, which must be mounted anyway. The schedule enters the run at C (near BOT), not at
    B1 (far along wrap 1): the locate is charged into whichever entry is cheapest."""
    copies = catalog([("F0", "V1", 1, int(1.7 * WRAP)), ("B1", "V1", 2, int(0.35 * WRAP)),
                      ("C0", "V1", 3, GB), ("D0", "V2", 1, GB),
                      ("B1", "V2", 2, int(0.35 * WRAP))])  # fmt: skip
    arrivals = [Arrival(0, "B1", 0.0), Arrival(1, "C0", 0.0), Arrival(2, "D0", 0.0)]
    terms = lower_bound(arrivals, copies, LTO9, 1, 1)
    assert terms.locates == 1
    best = check(arrivals, copies, LTO9)
    # The charged locate is the one into C from BOT, not the dearer one into B1.
    c_offset = int(1.7 * WRAP) + int(0.35 * WRAP)
    into_c = LTO9.locate_s(0, c_offset, LTO9.capacity_bytes)
    files = sum(LTO9.per_file_s + LTO9.transfer_s(s) for s in (int(0.35 * WRAP), GB, GB))
    work = files + 2 * LTO9.mount_s() + LTO9.unload_s + LTO9.robot_s + into_c
    assert terms.drive_work_s == pytest.approx(work)
    assert best > terms.value


def test_second_request_joins_the_open_first() -> None:
    """(c) The same pnfsid requested again while the first request is open: one read
    serves both, so only the first is charged a read after its arrival."""
    copies = catalog([("E1", "V1", 1, 72 * GB)])
    arrivals = [Arrival(0, "E1", 60.0), Arrival(1, "E1", 300.0)]
    terms = lower_bound(arrivals, copies, LTO9, 1, 1)
    file_s = LTO9.per_file_s + LTO9.transfer_s(72 * GB)
    assert terms.arrival_s == pytest.approx(max(60.0 + file_s, 300.0))
    assert check(arrivals, copies, LTO9) == pytest.approx(300.0)


# -- property: small catalogs against the exhaustive search -----------------------------

#: File sizes as shares of a cartridge: inside a wrap, across wraps, across a band.
SHARES = (0.0001, 0.002, 0.004, 0.02, 0.15)


@st.composite
def campaigns(
    draw: st.DrawFn, capacity: int, max_arrivals: int = 4
) -> tuple[list[CatalogRow], list[Arrival]]:
    """A few tapes of a few files; some files have copies on the same or other tapes; a
    few requests over time, some for the same file."""
    rows: list[CatalogRow] = []
    sizes: dict[str, int] = {}
    for t in range(draw(st.integers(1, 3))):
        for seq in range(1, draw(st.integers(1, 5)) + 1):
            if sizes and draw(st.booleans()):
                pnfsid = draw(st.sampled_from(sorted(sizes)))
            else:
                pnfsid = f"{len(sizes) + 1:04X}"
                sizes[pnfsid] = int(draw(st.sampled_from(SHARES)) * capacity)
            rows.append(CatalogRow(len(rows), pnfsid, f"V{t}", seq, sizes[pnfsid], "a:b", T0))
    times = st.sampled_from([0.0, 0.0, 10.0, 60.0, 300.0, 1000.0, 5000.0])
    arrivals = [
        Arrival(i, draw(st.sampled_from(sorted(sizes))), draw(times))
        for i in range(draw(st.integers(1, max_arrivals)))
    ]
    return rows, sorted(arrivals, key=lambda a: (a.at, a.index))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), profile_name=st.sampled_from(["lto9", "gridka-t10k"]))
def test_bound_never_exceeds_the_best_one_drive_schedule(
    data: st.DataObject, profile_name: str
) -> None:
    profile = get_profile(profile_name)
    rows, arrivals = data.draw(campaigns(profile.capacity_bytes))
    check(arrivals, copies_by_pnfsid(rows), profile)


def write(root: Path, rows: list[CatalogRow], arrivals: list[Arrival]) -> tuple[Path, Path]:
    catalog, requests = root / "catalog.csv", root / "requests.csv"
    with catalog.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
        w.writerows(
            [r.pnfsid, r.volume, r.seq, r.size, r.storage_class, r.written_at.isoformat()]
            for r in rows
        )
    with requests.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "at"])
        w.writerows([a.pnfsid, a.at] for a in arrivals)
    return catalog, requests


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    profile_name=st.sampled_from(["lto9", "gridka-t10k"]),
    drives=st.integers(1, 2),
)
def test_no_policy_finishes_below_the_bound(
    data: st.DataObject, profile_name: str, drives: int
) -> None:
    profile = get_profile(profile_name)
    rows, arrivals = data.draw(campaigns(profile.capacity_bytes, max_arrivals=6))
    with tempfile.TemporaryDirectory() as tmp:
        catalog, requests = write(Path(tmp), rows, arrivals)
        reports = [
            simulate(
                Options(catalog, requests, profile=profile_name, drives=drives, policy=policy),
                None,
                None,
            )
            for policy in ("tssd", "tss", "fifo")
        ]
    assert all(r["failed"] == 0 for r in reports)
    best = min(float(r["makespan_s"]) for r in reports)
    assert reports[0]["lower_bound_s"] <= best + 1e-3

"""A tape's estimated positions calibrated from its locate times (scheduler/calibrate.py),
the tour robust over the plausible scales (rao.robust_tour), and the batch read in
segments planned on what the tape has shown (scheduler/reads.py)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing

import pytest
from backend_stub import StubBackend
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sched_rao import GB, half_of_a_tape, items_at
from tssd.backends.base import ReadItem, ReadResult
from tssd.clock import inline
from tssd.scheduler import calibrate
from tssd.scheduler.calibrate import Calibration
from tssd.scheduler.drives import DriveState
from tssd.scheduler.rao import _runs, _scaled, locate_total, rao_order, robust_tour
from tssd.scheduler.reads import PlannedReads
from tssd.tape.geometry import ESTIMATE_SPREAD, GRIDKA_T10K, LTO9, PROFILES, Profile

ESTIMATED = dataclasses.replace(LTO9, position_spread=ESTIMATE_SPREAD)


def truth(spans: Sequence[tuple[int, int]], factor: float) -> list[tuple[int, int]]:
    return _scaled(spans, factor)


@settings(max_examples=40, deadline=None)
@given(
    factor=st.floats(min_value=1 - ESTIMATE_SPREAD, max_value=1 + ESTIMATE_SPREAD),
    seed=st.integers(0, 10_000),
)
def test_the_true_factor_stays_plausible_and_the_range_narrows(factor: float, seed: int) -> None:
    """Locate times from a tape scaled by *factor* never rule the factor out, and a
    pass over half a tape narrows the plausible range to well under the prior."""
    spans = half_of_a_tape(seed, files=300)
    real = truth(spans, factor)
    calibration = Calibration(ESTIMATED)
    head_est = head_true = 0
    capacity = LTO9.capacity_bytes
    for (offset, size), (start, true_size) in zip(spans, real, strict=True):
        calibration.observe(head_est, offset, LTO9.locate_s(head_true, start, capacity))
        head_est, head_true = offset + size, start + true_size
    low, high = calibration.plausible()
    step = ESTIMATE_SPREAD / 24
    assert low - step <= factor <= high + step
    assert high - low < ESTIMATE_SPREAD  # the prior is 2 x spread wide


def test_without_evidence_every_factor_is_plausible() -> None:
    calibration = Calibration(ESTIMATED)
    low, high = calibration.plausible()
    assert (low, high) == pytest.approx((1 - ESTIMATE_SPREAD, 1 + ESTIMATE_SPREAD))
    calibration.observe(5 * GB, 5 * GB, 0.0)  # the next file on tape: no evidence
    assert calibration.evidence == 0
    assert Calibration(LTO9).factors() == (1.0,)  # exact positions: nothing to calibrate


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40 * GB), min_size=1, max_size=30),
    factor=st.floats(min_value=0.9, max_value=1.1),
)
def test_scaling_keeps_objects_that_follow_each_other_contiguous(
    sizes: list[int], factor: float
) -> None:
    spans, offset = [], 0
    for size in sizes:
        spans.append((offset, size))
        offset += size
    scaled = _scaled(spans, factor)
    for (a, n), (b, _) in itertools.pairwise(scaled):
        assert a + n == b  # no locate charged between neighbours on tape


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), head=st.integers(0, 200 * GB))
def test_a_tour_over_one_factor_is_the_plain_tour(seed: int, head: int) -> None:
    rng = random.Random(seed)
    spans = sorted(
        (rng.randrange(0, 17_000 * GB), rng.randrange(1, 5 * GB)) for _ in range(rng.randint(1, 40))
    )
    spans = [s for i, s in enumerate(spans) if i == 0 or s[0] >= spans[i - 1][0] + spans[i - 1][1]]
    assert robust_tour(spans, head, LTO9, (1.0,)) == rao_order(spans, head, LTO9)
    order = robust_tour(spans, head, LTO9, (0.97, 1.0, 1.03))
    assert sorted(order) == list(range(len(spans)))


class TrueTape(StubBackend):
    """A backend stand-in reading copies where a factor puts them, reporting locate times."""

    name = "true-tape"

    def __init__(self, profile: Profile, factor: float) -> None:
        self.profile, self.factor = profile, factor
        self.head = 0
        self.calls = 0
        self.closed = 0

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        self.calls += 1
        try:
            for item in items:
                ((start, size),) = _scaled([(item.copy.offset, item.copy.size)], self.factor)
                locate_s = self.profile.locate_s(self.head, start, self.profile.capacity_bytes)
                self.head = start + size
                yield ReadResult(item, item.copy.size, None, locate_s=locate_s)
        finally:
            self.closed += 1


async def read_all(reads: PlannedReads, items: list[ReadItem], stop_after: int = 0) -> list[int]:
    drive = DriveState("d")
    seen: list[int] = []
    async with aclosing(reads.read(drive, "A", ESTIMATED, items, {})) as results:
        async for result in results:
            seen.append(result.item.copy.position)
            drive.head_offset = result.item.copy.offset + result.item.copy.size
            if stop_after and len(seen) == stop_after:
                break
    return seen


@pytest.mark.parametrize("factor", [0.975, 1.0, 1.025])
async def test_every_item_is_read_once_across_plans(factor: float) -> None:
    tape = TrueTape(GRIDKA_T10K, factor)
    reads = PlannedReads(tape, inline, "auto")
    items = items_at(half_of_a_tape(3, files=600))
    seen = await read_all(reads, items)
    assert sorted(seen) == sorted(i.copy.position for i in items)
    assert tape.calls > 1  # planned again as the scale narrowed
    assert tape.closed == tape.calls  # every backend read ended, none left to the collector


async def test_an_interrupted_batch_ends_the_backend_read() -> None:
    tape = TrueTape(GRIDKA_T10K, 1.01)
    reads = PlannedReads(tape, inline, "auto")
    items = items_at(half_of_a_tape(4, files=200))
    assert len(await read_all(reads, items, stop_after=5)) == 5
    assert tape.closed == tape.calls  # every backend read ended, the last one at once


async def test_calibrated_reads_locate_less_than_position_order() -> None:
    """On a tape 2 % longer than its estimate, calibrated RAO locates less than position
    order (and the estimate-blind tour, planned as if the estimate were exact, more)."""
    spans = half_of_a_tape(9, files=1000)
    real = truth(spans, 1.02)
    position = locate_total(real, 0, GRIDKA_T10K)
    assert await calibrated_locate_s(spans, 1.02) < 0.95 * position


def brute_force_tour(spans: list[tuple[int, int]], head: int, profile: Profile) -> list[int]:
    """The nearest-next tour by costing every remaining run at every step."""
    runs, order = _runs(spans), []
    left = list(range(len(runs)))
    while left:
        _, best = min(
            (profile.locate_s(head, runs[r].start, profile.capacity_bytes), r) for r in left
        )
        left.remove(best)
        order.extend(range(runs[best].first, runs[best].stop))
        head = runs[best].end
    return order


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), head=st.integers(0, 18_000 * GB))
def test_the_indexed_search_finds_what_costing_every_run_finds(seed: int, head: int) -> None:
    """The tour's nearest-run search looks at a few runs per band; costing every run at
    every step gives the same tour (on LTO-9 and T10000D geometry)."""
    rng = random.Random(seed)
    for profile in (LTO9, GRIDKA_T10K):
        capacity = profile.capacity_bytes
        spans, offset = [], rng.randrange(0, 10 * GB)
        while len(spans) < rng.randint(1, 60) and offset < capacity:
            size = rng.randrange(1, 20 * GB)
            spans.append((offset, size))
            offset += size + rng.choice((0, 0, rng.randrange(1, 400 * GB)))
        assert rao_order(spans, head, profile) == brute_force_tour(spans, head, profile)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(PROFILES)),
    head=st.integers(-10, 20_000 * GB),
    target=st.integers(-10, 20_000 * GB),
)
def test_the_inlined_locate_model_is_the_composed_one(name: str, head: int, target: int) -> None:
    """``Profile.locate_s`` inlines wrap_of/longitudinal/band_of for speed: same figures."""
    p = PROFILES[name]
    capacity = p.capacity_bytes
    expected = 0.0
    if head != target:
        travel = abs(p.longitudinal(target, capacity) - p.longitudinal(head, capacity))
        expected = p.locate_base_s + travel * p.locate_full_s
        if p.wrap_of(head, capacity) != p.wrap_of(target, capacity):
            expected += p.wrap_change_s
            if p.band_of(head, capacity) != p.band_of(target, capacity):
                expected += p.band_change_s
    assert p.locate_s(head, target, capacity) == expected


def calibrated(profile: Profile, spans: Sequence[tuple[int, int]], factor: float) -> Calibration:
    """A calibration fed the locate times of reading *spans* in position order from BOT
    on a tape whose true scale is *factor*."""
    calibration = Calibration(dataclasses.replace(profile, position_spread=ESTIMATE_SPREAD))
    head_est = head_true = 0
    capacity = profile.capacity_bytes
    for (offset, size), (start, true_size) in zip(spans, truth(spans, factor), strict=True):
        calibration.observe(head_est, offset, profile.locate_s(head_true, start, capacity))
        head_est, head_true = offset + size, start + true_size
    return calibration


@pytest.mark.parametrize("factor", [0.94, 0.95, 1.05, 1.07])
@pytest.mark.parametrize("profile", [LTO9, GRIDKA_T10K])
def test_a_factor_beyond_the_assumed_spread_is_found(profile: Profile, factor: float) -> None:
    """A tape scaled beyond the assumed 3 % (sim.layout_spread 0.05): the best candidate
    is the outermost one, so candidates are added beyond it, and the truth is found."""
    calibration = calibrated(profile, half_of_a_tape(7, files=300), factor)
    low, high = calibration.plausible()
    step = ESTIMATE_SPREAD / 24
    assert low - step <= factor <= high + step
    assert high - low < ESTIMATE_SPREAD
    assert not calibration.beyond()


async def test_a_factor_beyond_the_widest_candidates_is_read_in_position_order() -> None:
    """Beyond three times the assumed spread the candidates stop growing: ``beyond``, and
    the tape's next batch is read in position order (until the evidence is inside)."""
    spans = half_of_a_tape(7, files=300)
    assert calibrated(LTO9, spans, 1.15).beyond()
    assert not calibrated(LTO9, spans, 1.08).beyond()
    tape = TrueTape(LTO9, 1.15)
    reads = PlannedReads(tape, inline, "auto")
    reads._calibrations["A"] = calibrated(LTO9, spans, 1.15)  # a previous mount
    drive = DriveState("d")
    seen = []
    async for result in reads.read(drive, "A", ESTIMATED, items_at(half_of_a_tape(8)), {}):
        seen.append(result.item.copy.offset)
        drive.head_offset = result.item.copy.offset + result.item.copy.size
    assert seen == sorted(seen)


def test_past_its_memory_a_calibration_no_longer_widens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The locates that cost added candidates are bounded (``MEMORY``); past them the
    candidates stay as they are."""
    monkeypatch.setattr(calibrate, "MEMORY", 0)
    calibration = calibrated(LTO9, half_of_a_tape(7, files=300), 1.06)
    assert len(calibration._seen) == 0
    assert calibration.candidates[-1] == pytest.approx(1 + ESTIMATE_SPREAD)


@settings(max_examples=30, deadline=None)
@given(
    factor=st.floats(min_value=1 - 0.8 * ESTIMATE_SPREAD, max_value=1 + 0.8 * ESTIMATE_SPREAD),
    seed=st.integers(0, 10_000),
)
def test_within_the_assumed_spread_the_candidates_stay_as_they_were(
    factor: float, seed: int
) -> None:
    """A tape scaled within the assumed spread: no candidate is added, and the plausible
    factors are what the fixed candidates give (the behaviour before widening)."""
    calibration = calibrated(GRIDKA_T10K, half_of_a_tape(seed, files=200), factor)
    assert len(calibration.candidates) == 2 * 24 + 1
    assert calibration.candidates[0] == pytest.approx(1 - ESTIMATE_SPREAD)
    assert not calibration.beyond()


@pytest.mark.parametrize("factor", [0.95, 1.05])
async def test_calibrated_reads_beyond_the_assumed_spread_locate_less_than_position_order(
    factor: float,
) -> None:
    """On a tape 5 % off its estimate (beyond the 3 % assumed), calibrated RAO locates
    less than position order (before the candidates widened: 25 % more at 0.95)."""
    spans = half_of_a_tape(5, files=300)
    position = locate_total(truth(spans, factor), 0, GRIDKA_T10K)
    assert await calibrated_locate_s(spans, factor) < position


async def test_a_new_plan_gives_an_urgent_file_what_is_left_of_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch is planned again as the tape's scale narrows; an urgent file's time to be
    read (seconds from the batch's start) must shrink with the clock at each new plan,
    not be granted whole again (it then slid plan after plan towards the batch's end:
    trickle requests for a tape being read were read only as its session ended)."""
    import tssd.scheduler.reads as reads_module

    seen: list[float] = []
    plan = reads_module.order_reads

    def recording(items, drive, profile, mode, *, urgent=None, **rest):  # type: ignore[no-untyped-def]
        seen.extend(urgent.values() if urgent else [])
        return plan(items, drive, profile, mode, urgent=urgent, **rest)

    monkeypatch.setattr(reads_module, "order_reads", recording)
    tape = TrueTape(GRIDKA_T10K, 1.02)
    reads = PlannedReads(tape, inline, "auto")
    estimated = dataclasses.replace(GRIDKA_T10K, position_spread=ESTIMATE_SPREAD)
    items = items_at(half_of_a_tape(5, files=600))
    urgent = {id(items[-1]): 5000.0}
    clock = itertools.count(0.0, 10.0)  # ten seconds per look at the clock
    drive = DriveState("d")
    async with aclosing(
        reads.read(drive, "A", estimated, items, urgent, lambda: next(clock))
    ) as results:
        async for result in results:
            drive.head_offset = result.item.copy.offset + result.item.copy.size
            if id(result.item) in urgent:
                break
    assert len(seen) > 1 and seen[0] <= 5000.0  # planned again
    assert all(later < earlier for earlier, later in itertools.pairwise(seen))


async def calibrated_locate_s(spans: list[tuple[int, int]], factor: float) -> float:
    """Seconds of locating calibrated RAO spends reading *spans* (one batch, from BOT) on
    a gridka-t10k tape whose true scale is *factor* times its estimate."""
    reads = PlannedReads(TrueTape(GRIDKA_T10K, factor), inline, "auto")
    estimated = dataclasses.replace(GRIDKA_T10K, position_spread=ESTIMATE_SPREAD)
    drive = DriveState("d")
    total = 0.0
    async for result in reads.read(drive, "A", estimated, items_at(spans), {}):
        total += result.locate_s
        drive.head_offset = result.item.copy.offset + result.item.copy.size
    return total

"""What one read shows of a tape's scale (scheduler/calibrate.py: aliases), and the
lookahead choice of a small batch's next read (scheduler/lookahead.py, scheduler/reads.py)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import AsyncIterator, Sequence

import pytest
from backend_stub import StubBackend
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sched_rao import GB, T0
from tssd.backends.base import ReadItem, ReadResult, TapeCopy
from tssd.clock import inline
from tssd.files import CountingSink
from tssd.scheduler import lookahead
from tssd.scheduler.calibrate import Calibration
from tssd.scheduler.drives import DriveState
from tssd.scheduler.rao import _runs, _scaled, locate_total
from tssd.scheduler.reads import PlannedReads, _stepwise
from tssd.tape.geometry import ESTIMATE_SPREAD, LTO9

ESTIMATED = dataclasses.replace(LTO9, position_spread=ESTIMATE_SPREAD)
CAPACITY = LTO9.capacity_bytes
#: The simulated layout's per-object spread (sim.file_spread's default).
FILE_SPREAD = 0.02


def sparse_tape(seed: int, files: int = 2000, wanted: int = 5) -> tuple[list, list]:
    """A tape of 2 GB files (estimated spans) and *wanted* of them, in position order."""
    rng = random.Random(seed)
    spans, offset = [], 0
    for _ in range(files):
        size = int(rng.uniform(1.0, 3.0) * GB)
        spans.append((offset, size))
        offset += size
    chosen = sorted(rng.sample(range(files), wanted))
    return spans, chosen


def true_places(spans: Sequence[tuple[int, int]], factor: float, seed: int) -> list:
    """Where the objects truly are: the tape's factor times each object's own (the
    simulated layout's noise model, sim/layout.py)."""
    rng = random.Random(seed)
    out, used = [], 0.0
    for _, size in spans:
        start = used
        used += size * factor * max(0.5, rng.gauss(1.0, FILE_SPREAD))
        out.append((int(start), int(used)))
    return out


def nearest(calibration: Calibration, factor: float) -> float:
    return min(calibration.candidates, key=lambda f: abs(f - factor))


def test_one_locate_from_bot_leaves_narrow_aliases_around_the_truth() -> None:
    """A locate from BOT to a file 2 TB in times its longitudinal position: a few narrow
    groups of factors stay plausible (not the range between them), the truth among them."""
    target, factor = 2000 * GB, 1.012
    calibration = Calibration(ESTIMATED)
    calibration.observe(0, target, LTO9.locate_s(0, int(target * factor), CAPACITY))
    kept = calibration.kept()
    assert nearest(calibration, factor) in kept
    assert calibration.share() < 0.5
    inside = [f for f in calibration.candidates if kept[0] <= f <= kept[-1]]
    assert len(kept) < len(inside)  # aliases: groups with gaps between them


def test_the_true_factor_stays_plausible_under_per_file_variation() -> None:
    """Reads of sparse tapes whose objects vary by the noise model's per-file factor keep
    a factor near the tape's plausible."""
    kept = 0
    trials = 60
    for seed in range(trials):
        rng = random.Random(seed)
        factor = rng.uniform(1 - ESTIMATE_SPREAD, 1 + ESTIMATE_SPREAD)
        spans, chosen = sparse_tape(seed)
        real = true_places(spans, factor, seed)
        calibration = Calibration(ESTIMATED)
        head_est = head_true = 0
        for i in chosen:
            (offset, size), (start, end) = spans[i], real[i]
            calibration.observe(head_est, offset, LTO9.locate_s(head_true, start, CAPACITY))
            head_est, head_true = offset + size, end
        # Each copy's own drift moves the factor that best explains its locate by up to
        # ~0.2 % near BOT (0.02 x sqrt(2 GB / 200 GB)): two candidate steps.
        kept += min(abs(f - factor) for f in calibration.kept()) <= 2 * calibration.step
    assert kept >= 0.9 * trials


class NoisyTape(StubBackend):
    """A backend stand-in reading copies at their true places, reporting locate times."""

    name = "noisy-tape"

    def __init__(self, places: dict[int, tuple[int, int]]) -> None:
        self.places, self.head, self.calls, self.closed = places, 0, 0, 0

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        self.calls += 1
        try:
            for item in items:
                start, end = self.places[item.copy.offset]
                locate_s = LTO9.locate_s(self.head, start, CAPACITY)
                self.head = end
                yield ReadResult(item, item.copy.size, None, locate_s=locate_s)
        finally:
            self.closed += 1


def items_of(spans: Sequence[tuple[int, int]], chosen: Sequence[int]) -> list[ReadItem]:
    return [
        ReadItem(
            TapeCopy("P", "b", "A", i + 1, spans[i][1], None, None, T0, offset=spans[i][0]),
            CountingSink(),
        )
        for i in chosen
    ]


async def read_sparse(seed: int) -> tuple[float, float, int, int, int]:
    """(locate seconds, position order's, reads, backend calls, closed) for one tape."""
    factor = random.Random(-seed).uniform(1 - ESTIMATE_SPREAD, 1 + ESTIMATE_SPREAD)
    spans, chosen = sparse_tape(seed)
    real = true_places(spans, factor, seed)
    tape = NoisyTape({spans[i][0]: real[i] for i in range(len(spans))})
    reads = PlannedReads(tape, inline, "auto")
    drive, total, count = DriveState("d"), 0.0, 0
    async for result in reads.read(drive, "A", ESTIMATED, items_of(spans, chosen), {}):
        total += result.locate_s
        count += 1
        drive.head_offset = result.item.copy.offset + result.item.copy.size
    position = locate_total([(real[i][0], real[i][1] - real[i][0]) for i in chosen], 0, LTO9)
    return total, position, count, tape.calls, tape.closed


async def test_a_small_batch_is_read_one_planned_read_at_a_time() -> None:
    _, _, count, calls, closed = await read_sparse(3)
    assert count == 5
    assert calls == closed == 5  # planned again after every read, every read ended


async def test_lookahead_locates_less_than_position_order_and_than_the_robust_tour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Summed over sparse tapes (five files each): the lookahead's choice locates less
    than position order and than the robust tour replanned as the factors narrow."""
    seeds = range(40)
    looked = [await read_sparse(s) for s in seeds]
    monkeypatch.setattr(lookahead, "MAX_RUNS", 1)  # every batch by the robust tour
    toured = [await read_sparse(s) for s in seeds]
    assert sum(t[0] for t in looked) < sum(t[1] for t in looked)
    assert sum(t[0] for t in looked) < sum(t[0] for t in toured)


def test_higher_priority_files_keep_the_tour_that_places_them() -> None:
    spans, chosen = sparse_tape(5)
    items = items_of(spans, chosen)
    assert _stepwise(items, {})
    assert not _stepwise(items, {id(items[2]): 600.0})
    many, all_ = sparse_tape(6, wanted=40)
    assert not _stepwise(items_of(many, all_), {})  # a large batch: the robust tour


def test_next_read_enters_a_run_at_its_first_file() -> None:
    spans = [(0, GB), (500 * GB, GB), (501 * GB, GB), (3000 * GB, GB)]
    calibration = Calibration(ESTIMATED)
    for head in (0, 1200 * GB, 2600 * GB):
        assert lookahead.next_read(spans, head, calibration) in (0, 1, 3)


# -- the plan to the end of a batch (lookahead.expected): checked against brute force ------


@st.composite
def small_batches(draw: st.DrawFn) -> tuple[list, int, list[float]]:
    """2-4 runs of 1-3 GB files anywhere on an LTO-9 tape, a head, 1-6 hypotheses."""
    starts = sorted(draw(st.sets(st.integers(0, 17_000), min_size=2, max_size=4)))
    spans = [(s * GB, draw(st.integers(1, 3)) * GB) for s in starts]
    head = draw(st.integers(0, 18_000)) * GB
    steps = draw(st.sets(st.integers(-24, 24), min_size=1, max_size=6))
    return _runs(spans), head, [1.0 + 0.00125 * k for k in sorted(steps)]


def order_cost(runs: Sequence, order: Sequence[int], head: int, factor: float) -> float:
    """Model locate seconds of reading *runs* in *order* from *head*, at *factor*."""
    spans = [(runs[i].start, runs[i].end - runs[i].start) for i in order]
    return locate_total(_scaled(spans, factor), int(head * factor), LTO9)


@given(small_batches())
@settings(max_examples=60, deadline=None)
def test_with_one_hypothesis_the_plan_is_the_cheapest_order(case: tuple) -> None:
    runs, head, truths = case
    value, first = lookahead.expected(runs, head, LTO9, truths[:1])
    orders = list(itertools.permutations(range(len(runs))))
    best = min(order_cost(runs, o, head, truths[0]) for o in orders)
    assert value == pytest.approx(best, abs=1e-6)
    assert any(
        o[0] == first and order_cost(runs, o, head, truths[0]) == pytest.approx(best)
        for o in orders
    )


@given(small_batches())
@settings(max_examples=60, deadline=None)
def test_an_adaptive_plan_costs_between_knowing_the_truth_and_the_best_fixed_order(
    case: tuple,
) -> None:
    """The plan's expectation is a true one (the observation bins partition the
    hypotheses): no dearer than the best order fixed in advance, no cheaper than
    knowing the truth, by brute force over every order."""
    runs, head, truths = case
    value, _ = lookahead.expected(runs, head, LTO9, truths)
    orders = list(itertools.permutations(range(len(runs))))
    costs = {o: [order_cost(runs, o, head, f) for f in truths] for o in orders}
    fixed = min(sum(c) / len(truths) for c in costs.values())
    knowing = sum(min(costs[o][k] for o in orders) for k in range(len(truths))) / len(truths)
    assert knowing - 1e-6 <= value <= fixed + 1e-6


def test_observing_a_locate_partitions_the_hypotheses() -> None:
    times = {1.0: 10.0, 1.01: 11.5, 1.02: 12.1, 1.03: 40.0}
    groups = lookahead.observe(times)
    assert sorted(f for g in groups for f in g) == sorted(times)  # each once
    assert all(len({int(times[f] // 2.0) for f in g}) == 1 for g in groups)  # one bin each


# -- hypotheses weighted by their likelihood (lookahead.likelihoods) -----------------------


@given(small_batches(), st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6))
@settings(max_examples=60, deadline=None)
def test_a_weighted_plan_costs_between_knowing_the_truth_and_the_best_fixed_order(
    case: tuple, drawn: list[float]
) -> None:
    """With each hypothesis as likely as its weight, the expectation is still a true
    one: no dearer than the best fixed order, no cheaper than knowing the truth, each
    weighted the same way (brute force over every order)."""
    runs, head, truths = case
    weights = dict(zip(truths, drawn, strict=False))
    value, _ = lookahead.expected(runs, head, LTO9, truths, weights)
    mass = sum(weights.values())
    orders = list(itertools.permutations(range(len(runs))))
    costs = {o: [order_cost(runs, o, head, f) * weights[f] for f in truths] for o in orders}
    fixed = min(sum(c) for c in costs.values()) / mass
    knowing = sum(min(costs[o][k] for o in orders) for k in range(len(truths))) / mass
    assert knowing - 1e-6 <= value <= fixed + 1e-6


@given(small_batches(), st.floats(0.01, 10.0))
@settings(max_examples=40, deadline=None)
def test_equal_weights_plan_as_no_weights(case: tuple, weight: float) -> None:
    runs, head, truths = case
    plain = lookahead.expected(runs, head, LTO9, truths)
    weighted = lookahead.expected(runs, head, LTO9, truths, dict.fromkeys(truths, weight))
    assert weighted[0] == pytest.approx(plain[0], rel=1e-9)


def test_likelihoods_fall_with_the_error_and_start_equal() -> None:
    calibration = Calibration(ESTIMATED)
    before = lookahead.likelihoods(calibration)
    assert list(before) == calibration.candidates and set(before.values()) == {1.0}
    spans, chosen = sparse_tape(3)
    places = true_places(spans, 1.01, 3)
    target = chosen[-1]
    seen = LTO9.locate_s(0, places[target][0], CAPACITY)
    calibration.observe(0, spans[target][0], seen)
    weights = lookahead.likelihoods(calibration)
    errors = dict(zip(calibration.candidates, calibration.error, strict=True))
    assert max(weights.values()) == 1.0
    assert len(weights) < len(calibration.candidates)  # the unlikely ones left out
    assert min(weights.values()) >= lookahead.LEAST_LIKELY
    ranked = sorted(weights, key=lambda f: errors[f])
    assert [weights[f] for f in ranked] == sorted(weights.values(), reverse=True)


def test_a_tape_with_many_locates_is_planned_on_its_plausible_set_equally() -> None:
    """Past FEW_READS locates the summed error is mostly shared drift: the plan is the
    unweighted one over the calibration's plausible candidates."""
    spans, chosen = sparse_tape(5, wanted=4)
    places = true_places(spans, 0.99, 5)
    calibration = Calibration(ESTIMATED)
    head = 0
    for k in range(lookahead.FEW_READS + 1):
        target = (k * 37) % len(spans)
        seen = LTO9.locate_s(places[head][0] if head else 0, places[target][0], CAPACITY)
        calibration.observe(spans[head][0] if head else 0, spans[target][0], seen)
        head = target
    wanted = [spans[i] for i in chosen]
    runs = _runs(wanted)
    at = spans[head][0]
    plain = lookahead.exact_next(
        runs, at, ESTIMATED, lookahead.spaced(calibration.kept(), lookahead.EXACT_HYPOTHESES)
    )
    assert lookahead.next_read(wanted, at, calibration) == plain

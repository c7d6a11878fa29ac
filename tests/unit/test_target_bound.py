"""benchmarks/target_bound.py: its dynamic program against an exhaustive search over
schedules of the same model (mounts as intervals of drive time), on small integer cases."""

from __future__ import annotations

import random
import sys
from itertools import combinations_with_replacement, product
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from target_bound import bound, cycle_s, rewind_floor_s, tape_costs

from tssd.tape.geometry import LTO9, get_profile


def exhaustive(
    arrivals: list[int], target: int, session: int, cycle: int, misses: int, horizon: int = 12
) -> float:
    """The least extra drive time over every schedule of at most one mount per arrival
    (more never help: each mount beyond the first costs a cycle) on integer times in
    [0, *horizon*]: mounts last at least ``session + (m - 1) * cycle`` together and
    each but one at least ``cycle``; at least ``len(arrivals) - misses`` requests have a
    mount meeting their window ``[a, a + target]``."""
    intervals = [(u, v) for u in range(horizon + 1) for v in range(u, horizon + 1)]
    best = float("inf")
    for m in range(1, max(1, len(arrivals)) + 1):
        for mounts in combinations_with_replacement(intervals, m):
            lengths = sorted(v - u for u, v in mounts)
            total = sum(lengths)
            if total - session >= best or total < session + (m - 1) * cycle:
                continue
            if m > 1 and lengths[1] < cycle:
                continue
            served = sum(any(u <= a + target and v >= a for u, v in mounts) for a in arrivals)
            if served >= len(arrivals) - misses:
                best = total - session
    return best


CASES = [
    (sorted(random.Random(seed).choices(range(6), k=n)), target, session, cycle)
    for seed, (n, target, session, cycle) in enumerate(
        product((1, 2, 3), (0, 1, 2), (2, 3), (1, 2))
    )
]


@pytest.mark.parametrize(("arrivals", "target", "session", "cycle"), CASES)
def test_the_program_gives_the_least_extra_of_every_schedule(
    arrivals: list[int], target: int, session: int, cycle: int
) -> None:
    costs = tape_costs([float(a) for a in arrivals], target, session, cycle, len(arrivals))
    for misses in range(len(arrivals) + 1):
        assert costs[misses] == exhaustive(arrivals, target, session, cycle, misses)


@pytest.mark.parametrize(
    ("arrivals", "target", "session", "cycle"),
    [([0, 1, 4, 5], 0, 2, 1), ([0, 2, 3, 4], 0, 3, 1), ([0, 0, 3, 5], 1, 2, 1)],
)
def test_four_arrivals(arrivals: list[int], target: int, session: int, cycle: int) -> None:
    # The first case is one the earlier formula put above a schedule: two clusters
    # spanning 1 s each, read in a session split in two, cost one cycle (1), not 2.
    costs = tape_costs([float(a) for a in arrivals], target, session, cycle, 4)
    for misses in range(5):
        assert costs[misses] == exhaustive(arrivals, target, session, cycle, misses, horizon=7)


def test_a_split_session_serves_two_long_clusters_for_one_cycle() -> None:
    # Mounts [0, 50] and [300, 355] read the 100 s of bulk work plus one 5 s cycle and
    # meet all four windows; charging the second cluster a visit of its own (5 + 40 s,
    # the earlier formula) would put the "bound" above this schedule.
    assert tape_costs([0.0, 50.0, 300.0, 350.0], 10.0, 100.0, 5.0, 0) == [5.0]


def test_misses_go_where_they_save_most() -> None:
    per_tape = [[30.0, 10.0, 0.0], [20.0, 0.0]]
    assert bound(per_tape, 0) == 50.0
    assert bound(per_tape, 1) == 30.0  # the second tape's miss saves 20
    assert bound(per_tape, 2) == 10.0
    assert bound(per_tape, 3) == 0.0


def test_an_extra_mount_rewinds_at_least_what_reaching_its_file_costs() -> None:
    gb = 10**9
    # IBM's LTO-9 steps by contiguous bytes from BOT (55 / 110 s), or a locate's fixed
    # part and the last step (8 + 165 s), whichever is less.
    assert rewind_floor_s(LTO9, gb) == 55.0
    assert rewind_floor_s(LTO9, 10 * gb) == 110.0
    assert rewind_floor_s(LTO9, 100 * gb) == 165.0
    assert cycle_s(LTO9, [100 * gb, 10 * gb]) == 2 * 12.0 + 17.0 + 30.0 + 3.0 + 110.0
    # No published steps: the head may end anywhere, BOT too.
    t10k = get_profile("gridka-t10k")
    assert rewind_floor_s(t10k, 100 * gb) == 0.0
    assert cycle_s(t10k, [100 * gb]) == 2 * t10k.robot_s + t10k.load_s + t10k.unload_s + 5.0

"""How many drive-seconds must any schedule spend on a latency target's extra mounts?

Usage: python benchmarks/target_bound.py CAMPAIGN_DIR --profile P --target S
           --session S [--misses N] [--queue urgent]

A lower bound that does not depend on tssd's choices. For a request of the target-bearing
queue (arriving at ``a``) to be done by ``a + target``, its tape must be in a drive at some
moment of ``[a, a + target]``. Every tape is read anyway: its bulk work holds a drive
``--session`` seconds (the bulk-only makespan times the drives over the tapes), one mount
cycle included. That is the bound's one premise: a tape with more bulk work, or a
schedule that reads it faster, shifts the figure a little. The model, per tape:

- the tape is mounted ``m >= 1`` times; a mount is an interval of drive time, idle time
  counted, and serves the requests whose window ``[a, a + target]`` it meets: a mount
  serving arrivals ``a_first <= ... <= a_last`` lasts at least ``a_last - a_first -
  target`` (its *need*);
- the bulk work may be split over the mounts in any way, but each mount beyond the first
  costs a mount cycle on top of it (``cycle_s``): the robot both ways, load, unload, the
  per-file overhead of one read, and the least rewind on unload of a mount that read
  one of the tape's target-bearing files (``rewind_floor_s``: on LTO-9, IBM's steps by
  how many bytes it transferred contiguously from BOT, or a locate's fixed part and the
  last step; else none). So the mounts last at least ``session + (m - 1) * cycle``
  together, and each but one at least ``cycle``;
- the extra drive time is what the mounts last beyond ``session``.

The mounts serve contiguous clusters of the sorted arrivals (a mount meets the windows of
an interval of arrival times), and the cheapest mounts for given clusters last
``max(session + (m - 1) * cycle, need_base + sum over the others of max(need, cycle))``:
the extra is ``max((m - 1) * cycle, that sum - session)``, minimised by a dynamic program
over the sorted arrivals (which cluster is the base one is part of its state). Requests
may be left out (``--misses``, 5 % for a p95 target), spread over the tapes where they
save most (a min-plus knapsack). Relaxed away, so the bound can only be lower: the drive
count (any number of mounts at once), one drive per cartridge, the time the urgent reads
themselves take and the locates to them. The files' places are those ``tssd simulate``
gives them with its default sim settings (``true_ends``); each file has one copy.
``tests/unit/test_target_bound.py`` checks the dynamic program against an exhaustive
search over schedules on small cases.

An earlier version charged every mount but the bulk session ``cycle + max(0, d -
target)`` for a cluster spanning ``d`` seconds, as if the bulk work could not be split: a
session split in two covers two long clusters for one cycle, so that figure was not a
bound (the test's ``test_a_split_session_serves_two_long_clusters_for_one_cycle``); its
cycle also counted a locate's fixed part, which a mount reading contiguously from BOT
does not pay, and LTO-9's shortest rewind whatever the files' places.

Prints the bound in drive-seconds; compare it with the room the bulk-only run leaves
before the last bulk file is 5 % later (10 drives times 1.05 times its makespan, minus its
busy drive time).
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

from tssd.backends.sim.layout import physical_offsets
from tssd.config import SimSettings
from tssd.tape.geometry import Profile, get_profile


def rewind_floor_s(p: Profile, end: int) -> float:
    """The least rewind on unload of a mount that read a file ending at true physical
    offset *end*. With published steps (IBM's, LTO-9) the mount either located, a
    locate's fixed part and the last step, or transferred contiguously from BOT to at
    least *end*, the step of that many bytes. Without steps 0: the head may end its
    reads anywhere, at BOT too."""
    if not p.rewind_steps_s:
        return 0.0
    contiguous = p.unload_rewind_s(end, p.capacity_bytes, max(1, end))
    return min(p.locate_base_s + p.rewind_steps_s[-1], contiguous)


def cycle_s(p: Profile, ends: list[int]) -> float:
    """The cheapest extra mount of a tape whose target-bearing files end at *ends*
    (true physical offsets): the robot both ways, load, unload, the per-file overhead of
    one read and the least rewind of a mount that read one of them."""
    rewind = min((rewind_floor_s(p, end) for end in ends), default=0.0)
    return 2 * p.robot_s + p.load_s + p.unload_s + p.per_file_s + rewind


def true_ends(catalog: Path, wanted: set[str]) -> dict[str, tuple[str, int]]:
    """pnfsid -> (volume, true physical end offset) of each file of *wanted*, where
    ``tssd simulate`` with its default sim settings lays them out (``layout.py``: offsets
    the sum of the sizes before, in sequence order, times the tape's and the file's
    factors). A file with copies on several tapes is refused: the model takes one."""
    by_volume: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    with catalog.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            by_volume[row["volume"]].append((int(row["seq"]), int(row["size"]), row["pnfsid"]))
    s = SimSettings()
    found: dict[str, tuple[str, int]] = {}
    for volume, rows in by_volume.items():
        rows.sort()
        objects, used = [], 0
        for seq, size, _ in rows:
            objects.append((seq, used, size))
            used += size
        places = physical_offsets(volume, objects, s.layout_spread, s.file_spread, s.seed)
        for (_, _, pnfsid), (_, end) in zip(rows, places, strict=True):
            if pnfsid in wanted:
                if pnfsid in found:
                    raise SystemExit(f"{pnfsid} has copies on several tapes: not modelled")
                found[pnfsid] = (volume, end)
    return found


def tape_costs(arrivals: list[float], target: float, session: float, cycle: float,
               misses: int) -> list[float]:  # fmt: skip
    """Least extra drive time for one tape's sorted *arrivals*, with exactly 0..*misses*
    of them left out (module docstring: the mounts' model)."""
    n = len(arrivals)
    inf = math.inf
    # best[j][k][m][b]: least sum of the mounts' lower lengths, arrivals before j handled,
    # k left out, m clusters formed, b = the base mount (no cycle of its own) chosen.
    best = [[[[inf, inf] for _ in range(n + 1)] for _ in range(misses + 1)] for _ in range(n + 1)]
    best[0][0][0][0] = 0.0
    for j in range(n):
        for k in range(misses + 1):
            for m in range(j + 1):
                for b in (0, 1):
                    here = best[j][k][m][b]
                    if here == inf:
                        continue
                    if k < misses:  # leave arrival j out
                        cell = best[j + 1][k + 1][m]
                        cell[b] = min(cell[b], here)
                    for end in range(j, n):  # one mount serves arrivals j..end
                        need = max(0.0, arrivals[end] - arrivals[j] - target)
                        cell = best[end + 1][k][m + 1]
                        cell[b] = min(cell[b], here + max(need, cycle))
                        if not b:
                            cell[1] = min(cell[1], here + need)
    costs = []
    for k in range(misses + 1):
        options = [0.0] if best[n][k][0][0] == 0.0 else []  # every arrival left out
        for m in range(1, n + 1):
            if best[n][k][m][1] < inf:
                options.append(max((m - 1) * cycle, best[n][k][m][1] - session))
        costs.append(min(options, default=inf))
    return costs


def bound(per_tape: list[list[float]], misses: int) -> float:
    """Spread *misses* over the tapes where they save most (min-plus knapsack)."""
    total = [0.0] + [math.inf] * misses
    for costs in per_tape:
        total = [
            min(total[k - i] + costs[i] for i in range(min(k, len(costs) - 1) + 1))
            for k in range(misses + 1)
        ]
    return min(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--profile", default="lto9")
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--session", type=float, required=True, help="bulk session, s")
    parser.add_argument("--misses", type=int, help="requests that may miss (default 5 %%)")
    parser.add_argument("--queue", default="urgent")
    args = parser.parse_args()
    urgent: list[tuple[str, float]] = []
    with (args.campaign / "requests.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("queue") == args.queue:
                urgent.append((row["pnfsid"], float(row["at"])))
    where = true_ends(args.campaign / "catalog.csv", {pnfsid for pnfsid, _ in urgent})
    arrivals: dict[str, list[float]] = defaultdict(list)
    ends: dict[str, list[int]] = defaultdict(list)
    for pnfsid, at in urgent:
        volume, end = where[pnfsid]
        arrivals[volume].append(at)
        ends[volume].append(end)
    count = len(urgent)
    misses = args.misses if args.misses is not None else count * 5 // 100
    profile = get_profile(args.profile)
    cycles = {volume: cycle_s(profile, ends[volume]) for volume in arrivals}
    per_tape = [
        tape_costs(sorted(a), args.target, args.session, cycles[v], misses)
        for v, a in arrivals.items()
    ]
    extra = bound(per_tape, misses)
    low, high = min(cycles.values()), max(cycles.values())
    print(f"{count} requests on {len(arrivals)} tapes, {misses} may miss")
    print(f"cheapest extra mount per tape: {low:.0f}-{high:.0f} s")
    print(f"target {args.target:.0f} s: extra mounts cost at least {extra:.0f} drive-s")


if __name__ == "__main__":
    main()

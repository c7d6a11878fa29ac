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
- the bulk work may be split over the mounts in any way (a session that yields and is
  remounted later), but each mount beyond the first costs a mount cycle on top of it:
  the robot both ways, load, the shortest rewind on unload, unload, one locate's fixed
  part, the per-file overhead (``cycle_s``). So the mounts last at least ``session +
  (m - 1) * cycle`` together, and each but one at least ``cycle``;
- the extra drive time is what the mounts last beyond ``session``.

The mounts serve contiguous clusters of the sorted arrivals (a mount meets the windows of
an interval of arrival times), and the cheapest mounts for given clusters last
``max(session + (m - 1) * cycle, need_base + sum over the others of max(need, cycle))``:
the extra is ``max((m - 1) * cycle, that sum - session)``, minimised by a dynamic program
over the sorted arrivals (which cluster is the base one is part of its state). Requests
may be left out (``--misses``, 5 % for a p95 target), spread over the tapes where they
save most (a min-plus knapsack). Relaxed away, so the bound can only be lower: the drive
count (any number of mounts at once), one drive per cartridge, the time the urgent reads
themselves take, and where on the tape they are. ``tests/unit/test_target_bound.py``
checks the dynamic program against an exhaustive search over schedules on small cases.

An earlier version charged every mount but the bulk session ``cycle + max(0, d -
target)`` for a cluster spanning ``d`` seconds, as if the bulk work could not be split: a
session split in two covers two long clusters for one cycle, so that figure was not a
bound (the test's ``test_a_split_session_serves_two_long_clusters_for_one_cycle``).

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

from tssd.tape.geometry import Profile, get_profile


def cycle_s(p: Profile) -> float:
    """The cheapest extra mount: robot both ways, load, shortest rewind, unload, one
    locate's fixed part and the per-file overhead of one read."""
    rewind = p.rewind_steps_s[0] if p.rewind_steps_s else 0.0
    return 2 * p.robot_s + p.load_s + rewind + p.unload_s + p.locate_base_s + p.per_file_s


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
    volume_of: dict[str, str] = {}
    with (args.campaign / "catalog.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            volume_of.setdefault(row["pnfsid"], row["volume"])
    arrivals: dict[str, list[float]] = defaultdict(list)
    with (args.campaign / "requests.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("queue") == args.queue:
                arrivals[volume_of[row["pnfsid"]]].append(float(row["at"]))
    count = sum(len(a) for a in arrivals.values())
    misses = args.misses if args.misses is not None else count * 5 // 100
    cycle = cycle_s(get_profile(args.profile))
    per_tape = [
        tape_costs(sorted(a), args.target, args.session, cycle, misses) for a in arrivals.values()
    ]
    extra = bound(per_tape, misses)
    print(f"{count} requests on {len(arrivals)} tapes, {misses} may miss; cycle {cycle:.0f} s")
    print(f"target {args.target:.0f} s: extra mounts cost at least {extra:.0f} drive-s")


if __name__ == "__main__":
    main()

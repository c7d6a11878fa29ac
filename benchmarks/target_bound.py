"""How many drive-seconds must any schedule spend on a latency target's extra mounts?

Usage: python benchmarks/target_bound.py CAMPAIGN_DIR --profile P --target S
           --session S [--misses N] [--queue urgent]

A lower bound that does not depend on tssd's choices. For a request of the target-bearing
queue (arriving at ``a``) to be done by ``a + target``, its tape must be in a drive at some
moment of ``[a, a + target]``. Every tape is mounted at least once anyway, for its bulk
work; that session lasts ``--session`` seconds (the bulk work's drive time, e.g. the
bulk-only makespan times the drives over the tapes). That is the bound's one premise: a
tape with more bulk work, or a schedule that reads it faster, shifts the figure a little
(a schedule reading it more slowly spends the difference too). Any further mount of the tape
costs at least a mount cycle: the robot both ways, load, the shortest rewind on unload,
unload, one locate's fixed part, the per-file overhead. A mount held open longer than the
bulk work (or than a visit's reads) costs its idle time too.

So per tape, the arrivals (sorted) are split into clusters, one of which the bulk session
serves; a cluster spanning ``d`` seconds costs ``max(0, d - target - session)`` for the
bulk session and ``cycle + max(0, d - target)`` for any other. The cheapest split is a
dynamic program over the sorted arrivals; ``--misses`` requests (5 % for a p95 target) may
be left out, spread over the tapes where they save most (a min-plus knapsack). The drive
count is relaxed away (any number of visits at once): the bound can only be lower.

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
    """Least extra drive time for one tape's sorted *arrivals*, with 0..*misses* left out."""
    n = len(arrivals)
    inf = math.inf
    # best[j][k][b]: arrivals before j handled, k left out, b = bulk session used.
    best = [[[inf, inf] for _ in range(misses + 1)] for _ in range(n + 1)]
    best[0][0][0] = 0.0
    for j in range(n):
        for k in range(misses + 1):
            for b in (0, 1):
                here = best[j][k][b]
                if here == inf:
                    continue
                if k < misses:  # leave arrival j out
                    best[j + 1][k + 1][b] = min(best[j + 1][k + 1][b], here)
                for end in range(j, n):  # one mount serves arrivals j..end
                    span = arrivals[end] - arrivals[j]
                    visit = here + cycle + max(0.0, span - target)
                    best[end + 1][k][b] = min(best[end + 1][k][b], visit)
                    if not b:
                        bulk = here + max(0.0, span - target - session)
                        best[end + 1][k][1] = min(best[end + 1][k][1], bulk)
    return [min(best[n][k]) for k in range(misses + 1)]


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

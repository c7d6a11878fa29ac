"""How many drive-seconds would visits for the urgent trickle take, given tssd's own bulk sessions?

Usage: python benchmarks/trickle_oracle.py CAMPAIGN_DIR [--profile P] [--limit S]

Runs the campaign (``benchmarks/campaigns.py trickle``) with the ``tssd`` policy, then
asks what a clairvoyant planner that knows every arrival in advance would need: an
urgent request is free when its tape is mounted for bulk work at some time within
``--limit`` seconds after it arrives (default: a fifth of the bulk p95, the acceptance
latency); the others need visits, each visit serving every request of its tape whose
window it falls in (optimal interval stabbing). A visit costs at least the robot both
ways, load, the locates from BOT in position order, the reads, the rewind and the
unload on the profile's model. Prints the visits, their cost, and the 5 % allowance
(a twentieth of the bulk-only makespan, given with ``--baseline``) in drive-seconds.

Not a lower bound: it keeps tssd's bulk sessions, and a visit reading its files in
another order than position order can cost less (issue 18). For a bound that depends on
no schedule, see ``target_bound.py``.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from tssd.backends.sim.profiles import Profile, get_profile
from tssd.logs import configure_logging
from tssd.simulate.campaign import copies_by_pnfsid, load_catalog_rows, load_requests
from tssd.simulate.runner import Options, Outcome, run_campaign
from tssd.simulate.vloop import run_virtual


def visit_cost(spans: list[tuple[int, int]], p: Profile) -> float:
    cost, head = 2 * p.robot_s + p.load_s + p.unload_s, 0
    for offset, size in sorted(spans):
        cost += p.locate_s(head, offset, p.capacity_bytes) + p.per_file_s + p.transfer_s(size)
        head = offset + size
    return cost + p.rewind_s(head, p.capacity_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--profile", default="lto9")
    parser.add_argument("--limit", type=float, help="latency limit, s (default: bulk p95 / 5)")
    parser.add_argument("--baseline", type=float, help="bulk-only makespan, s")
    args = parser.parse_args()
    configure_logging("warning")
    options = Options(
        catalog=args.campaign / "catalog.csv", requests=args.campaign / "requests.csv",
        profile=args.profile, drives=10, policy="tssd",
    )  # fmt: skip
    arrivals = load_requests(options.requests)
    text = options.catalog.read_text(encoding="utf-8")
    outcome: Outcome = run_virtual(lambda: run_campaign(options, arrivals, text))
    profile = get_profile(args.profile)
    rows = load_catalog_rows(options.catalog)
    copies = copies_by_pnfsid(rows)
    # Files lie on their tape one after the other, in sequence order.
    offset_of: dict[tuple[str, int], int] = {}
    ends: dict[str, int] = defaultdict(int)
    for row in sorted(rows, key=lambda r: (r.volume, r.seq)):
        offset_of[row.volume, row.seq] = ends[row.volume]
        ends[row.volume] += row.size
    by_id = {r.id: r for r in outcome.requests}
    bulk_s = sorted(
        outcome.finished_at[rid] - a.at
        for a in arrivals
        if a.priority == 0 and (rid := outcome.request_of.get(a.index)) in outcome.finished_at
    )
    limit = args.limit or statistics.quantiles(bulk_s, n=20)[-1] / 5
    sessions: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for m in outcome.mounts:
        if m.files > 5:  # bulk sessions (visits read a few files)
            sessions[m.volume].append((m.ready, m.unload or outcome.makespan_s))
    urgent: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for a in arrivals:
        if a.priority > 0:
            request = by_id[outcome.request_of[a.index]]
            urgent[request.volume or ""].append((a.at, a.pnfsid))
    visits, cost, in_session = 0, 0.0, 0
    for volume, waiting in urgent.items():
        groups: list[tuple[float, list[tuple[int, int]]]] = []
        for at, pnfsid in sorted(waiting):
            if any(s <= at + limit and e >= at for s, e in sessions[volume]):
                in_session += 1
                continue
            copy = next(c for c in copies[pnfsid] if c.volume == volume)
            span = (offset_of[volume, copy.seq], copy.size)
            if groups and at <= groups[-1][0]:
                groups[-1][1].append(span)
            else:
                groups.append((at + limit, [span]))
        visits += len(groups)
        cost += sum(visit_cost(spans, profile) for _, spans in groups)
    print(f"latency limit {limit:.0f} s; urgent requests served in bulk sessions: {in_session}")
    print(f"oracle visits {visits}, at least {cost:.0f} drive-s ({cost / max(visits, 1):.0f} each)")
    print(f"tssd: {outcome.makespan_s:.0f} s, {len(outcome.mounts)} mounts")
    if args.baseline:
        print(f"5 % allowance: {0.05 * args.baseline * 10:.0f} drive-s over 10 drives")


if __name__ == "__main__":
    main()

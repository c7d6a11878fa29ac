"""Issue 4 acceptance runs: ``tssd simulate`` with scheduler settings overridden.

Usage: python benchmarks/sched_acceptance.py CAMPAIGN_DIR --profile P --policy P
           [--drives N] [--set KEY=VALUE ...] [--sim KEY=VALUE ...] [--report OUT.json]

CAMPAIGN_DIR holds catalog.csv and requests.csv (``benchmarks/campaigns.py``). ``--set``
overrides a ``[scheduler]`` setting for the run (e.g. ``--set rao=off``), which the
``tssd simulate`` command line does not expose. Prints the report (the keys of docs/benchmarks.md,
plus ``locate_s`` and per-queue figures).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from tssd.config import SchedulerSettings, SimSettings
from tssd.simulate.command import simulate
from tssd.simulate.runner import Options


def parse_set(items: list[str], section: Any = SchedulerSettings) -> tuple[tuple[str, Any], ...]:
    types = {f.name: f.type for f in fields(section)}
    out = []
    for item in items:
        key, _, value = item.partition("=")
        kind = str(types[key])
        cast: Any = float if "float" in kind else int if "int" in kind else str
        out.append((key, cast(value)))
    return tuple(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--profile", default="lto9")
    parser.add_argument("--policy", default="tssd")
    parser.add_argument("--drives", type=int, default=10)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--sim", action="append", default=[], dest="sim_overrides",
                        help="a [sim] setting, e.g. layout_spread=0 (the true layout)")  # fmt: skip
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    options = Options(
        catalog=args.campaign / "catalog.csv", requests=args.campaign / "requests.csv",
        profile=args.profile, drives=args.drives, policy=args.policy,
        scheduler=parse_set(args.overrides), sim=parse_set(args.sim_overrides, SimSettings),
    )  # fmt: skip
    report = simulate(options, args.report, None)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

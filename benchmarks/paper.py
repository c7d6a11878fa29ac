"""Reproduce the GridKa paper's figures with ``tssd simulate`` and print a Markdown table.

Usage: python benchmarks/paper.py WORKDIR [--scale F] [--only NAME ...]

Every row generates its campaign with benchmarks/campaigns.py (seed 1) and runs
``tssd simulate`` on it; the report JSONs stay in WORKDIR.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TSSD = Path(sys.executable).parent / "tssd"

# name, scenario, profile, drives, policy, window, paper figure (MB/s per drive) or None
RUNS = [
    ("whole6", "whole6", "gridka-t10k", 6, "tss", None, 150.0),
    ("whole10", "whole10", "gridka-t10k", 10, "tss", None, 150.0),
    ("indiv6", "indiv6", "gridka-t10k", 6, "tss", None, 130.0),
    ("indiv10", "indiv10", "gridka-t10k", 10, "tss", None, 130.0),
    ("large", "large", "gridka-t10k", 1, "tss", None, 160.0),
    ("small", "small", "gridka-t10k", 8, "tss", None, 30.0),
    ("gridka-tss-w2000", "gridka", "gridka-t10k", 10, "tss", 2000, None),
    ("gridka-tss-w30000", "gridka", "gridka-t10k", 10, "tss", 30000, None),
    ("gridka-fifo", "gridka", "gridka-t10k", 10, "fifo", None, None),
    ("gridka-tss", "gridka", "gridka-t10k", 10, "tss", None, None),
    ("gridka-tssd", "gridka", "gridka-t10k", 10, "tssd", None, None),
    ("gridka-tssd-lto9", "gridka", "lto9", 10, "tssd", None, None),
    ("duplicates-tss", "duplicates", "gridka-t10k", 10, "tss", None, None),
    ("duplicates-tssd", "duplicates", "gridka-t10k", 10, "tssd", None, None),
]


def campaign(workdir: Path, scenario: str, scale: float) -> Path:
    target = workdir / f"{scenario}-x{scale:g}"
    if not (target / "requests.csv").exists():
        subprocess.run([sys.executable, str(HERE / "campaigns.py"), scenario, str(target),
                        "--seed", "1", "--scale", str(scale)], check=True)  # fmt: skip
    return target


def run(workdir: Path, row: tuple, scale: float) -> dict:
    name, scenario, profile, drives, policy, window, _paper = row
    camp = campaign(workdir, scenario, scale)
    report = workdir / f"{name}.json"
    cmd = [str(TSSD), "simulate", "--catalog", str(camp / "catalog.csv"),
           "--requests", str(camp / "requests.csv"), "--profile", profile,
           "--drives", str(drives), "--policy", policy, "--report", str(report)]  # fmt: skip
    if window:
        cmd += ["--window", str(window)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(report.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print("| run | files | drives | MB/s | MB/s per drive | paper | mounts | tapes | "
          "makespan s | bound s | bound/makespan | efficiency | wall s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in RUNS:
        if args.only and row[0] not in args.only:
            continue
        r = run(args.workdir, row, args.scale)
        per_drive = r["throughput_mb_s"] / r["drives"]
        paper = f"{row[6]:.0f}" if row[6] else "-"
        print(f"| {row[0]} | {r['files']} | {r['drives']} | {r['throughput_mb_s']:.0f} | "
              f"{per_drive:.0f} | {paper} | {r['mounts']} | {r['tapes_mounted']} | "
              f"{r['makespan_s']:.0f} | {r['lower_bound_s']:.0f} | "
              f"{r['lower_bound_s'] / r['makespan_s']:.2f} | {r['mount_efficiency']:.2f} | "
              f"{r['wall_s']:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

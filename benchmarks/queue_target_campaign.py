"""A small campaign for latency targets per queue (docs/scheduling.md, "Latency targets
per queue"): 12 LTO-9 tapes of 80 files (0.5-4 GB), about 650 requests over 20,000 s, a
few of them in queue ``urgent`` (priority 0, or --urgent-priority).

    python benchmarks/queue_target_campaign.py OUTDIR
    tssd simulate --catalog OUTDIR/catalog.csv --requests OUTDIR/requests.csv --drives 3 \\
        [--config tssd.toml]   # with [[queues]] name = "urgent" latency_target_s = "15m"
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path


def write(out: Path, seed: int = 3, urgent_priority: int = 0) -> None:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "catalog.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
        for t in range(12):
            for s in range(1, 81):
                w.writerow([f"{t:04X}{s:08X}", f"V{t:04d}", s, rng.randint(5 * 10**8, 4 * 10**9),
                            "a:t", "2020-01-01T00:00:00+00:00"])  # fmt: skip
    rows = []
    for t in range(12):
        for s in range(1, 81):
            if rng.random() < 0.6:
                rows.append([f"{t:04X}{s:08X}", round(rng.uniform(0, 20000), 1), 0, "bulk"])
            elif rng.random() < 0.1:
                at = round(rng.uniform(0, 20000), 1)
                rows.append([f"{t:04X}{s:08X}", at, urgent_priority, "urgent"])
    rows.sort(key=lambda r: r[1])
    with (out / "requests.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "at", "priority", "queue"])
        w.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--urgent-priority", type=int, default=0)
    args = parser.parse_args()
    write(args.out, args.seed, args.urgent_priority)


if __name__ == "__main__":
    main()

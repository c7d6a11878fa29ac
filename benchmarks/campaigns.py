"""Seeded campaign generators for ``tssd simulate`` (catalog + requests CSVs).

Usage: python benchmarks/campaigns.py SCENARIO OUTDIR [--seed N] [--scale F]

Scenarios (sizes in the spirit of GridKa's CHEP 2019 paper):
  gridka        60 tapes of ~1,000 files (2 GB average, lognormal), 30,000 of them
                requested in random order at t=0 (the paper's 30,000-request test).
  whole6        whole-tape recall: every file of 6 tapes (15,536 files, 2 GB average).
  whole10       every file of 10 tapes (25,997 files).
  indiv6        individual files: 12,787 of the 15,536 files of the whole6 tapes.
  indiv10       21,071 of the 25,997 files of the whole10 tapes.
  duplicates    27,079 files on 10 tapes; later extra copies of many of them spread
                over 48 other tapes (dCache re-writes of unacknowledged stores).
  large         files > 9 GB: a third of the files of 20 tapes (one drive).
  small         files < 1 GB: 60 % of the files of 40 tapes (eight drives).
  sparse        a few files on each of 200 tapes (for RAO and mount-choice studies).
  trickle       the gridka campaign plus a 1 % high-priority trickle arriving over time.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

GB = 10**9
EPOCH = datetime(2019, 1, 1, tzinfo=UTC)


@dataclass
class Copy:
    pnfsid: str
    volume: str
    seq: int
    size: int
    storage_class: str
    written_at: datetime


def lognormal_size(rng: random.Random, mean: float, sigma: float = 0.6,
                   lo: int = 1, hi: int | None = None) -> int:  # fmt: skip
    mu = math.log(mean) - sigma**2 / 2
    while True:
        size = int(rng.lognormvariate(mu, sigma))
        if size >= lo and (hi is None or size <= hi):
            return size


def fill_tapes(rng: random.Random, counts: list[int], mean: float, first: int = 0,
               prefix: str = "T", lo: int = 1, hi: int | None = None) -> list[Copy]:  # fmt: skip
    copies = []
    n = 0
    for t, count in enumerate(counts):
        volume = f"{prefix}{first + t:05d}"
        written = EPOCH + timedelta(days=t)
        for seq in range(1, count + 1):
            n += 1
            pnfsid = f"{(first + t):08X}{seq:08X}{n:016X}"
            size = lognormal_size(rng, mean, lo=lo, hi=hi)
            copies.append(Copy(pnfsid, volume, seq, size, "atlas:tape",
                               written + timedelta(seconds=seq)))  # fmt: skip
    return copies


def split_evenly(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def scenario(name: str, rng: random.Random, scale: float) -> tuple[list[Copy], list[tuple]]:
    def n(x: int) -> int:
        return max(1, int(x * scale))

    if name == "gridka":
        copies = fill_tapes(rng, [n(1000)] * 60, 2.0 * GB)
        chosen = rng.sample(copies, min(len(copies), n(30000)))
        return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]
    if name in ("whole6", "whole10", "indiv6", "indiv10"):
        tapes = 6 if name.endswith("6") else 10
        total = n(15536) if tapes == 6 else n(25997)
        copies = fill_tapes(rng, split_evenly(total, tapes), 2.0 * GB)
        if name.startswith("whole"):
            chosen = copies
        else:
            k = n(12787) if tapes == 6 else n(21071)
            chosen = rng.sample(copies, min(k, len(copies)))
        rng.shuffle(chosen)
        return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]
    if name == "duplicates":
        return duplicates(rng, n)
    if name == "large":
        # One drive, a third of the large files of 20 tapes (the paper's one-drive test).
        copies = fill_tapes(rng, [n(300)] * 20, 12 * GB, lo=9 * GB + 1)
        chosen = rng.sample(copies, len(copies) // 3)
        return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]
    if name == "small":
        # Eight drives, 60 % of the small files of 40 tapes.
        copies = fill_tapes(rng, [n(1000)] * 40, 0.4 * GB, hi=GB - 1)
        chosen = rng.sample(copies, int(len(copies) * 0.6))
        return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]
    if name == "sparse":
        copies = fill_tapes(rng, [n(2000)] * 200, 2.0 * GB)
        by_tape: dict[str, list[Copy]] = {}
        for c in copies:
            by_tape.setdefault(c.volume, []).append(c)
        chosen = [c for tape in by_tape.values() for c in rng.sample(tape, 5)]
        rng.shuffle(chosen)
        return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]
    if name == "trickle":
        copies, bulk = scenario("gridka", rng, scale)
        wanted = {p for p, *_ in bulk}
        others = [c for c in copies if c.pnfsid not in wanted]
        k = max(1, len(bulk) // 100)
        horizon = 8 * 3600
        urgent = [(c.pnfsid, round(rng.uniform(0, horizon), 3), 10, "urgent")
                  for c in rng.sample(others, k)]  # fmt: skip
        return copies, bulk + urgent
    raise SystemExit(f"unknown scenario {name!r}")


def duplicates(rng: random.Random, n: object) -> tuple[list[Copy], list[tuple]]:
    """The paper's case: 27,079 files on 10 tapes made 58 queues under TSS."""
    scale_n = n  # type: ignore[assignment]
    originals = fill_tapes(rng, split_evenly(scale_n(27079), 10), 2.0 * GB)  # type: ignore[operator]
    later = EPOCH + timedelta(days=400)
    extra_tapes = [f"D{t:05d}" for t in range(48)]
    seqs = dict.fromkeys(extra_tapes, 0)
    copies = list(originals)
    rewritten = rng.sample(originals, int(len(originals) * 0.2))
    for i, c in enumerate(rewritten):
        # Every extra tape gets some re-writes, so that newest-copy choice touches all 48.
        volume = extra_tapes[i % 48] if i < 48 else rng.choice(extra_tapes)
        for _ in range(1 + (rng.random() < 0.1)):
            seqs[volume] += 1
            copies.append(Copy(c.pnfsid, volume, seqs[volume], c.size, c.storage_class,
                               later + timedelta(minutes=i)))  # fmt: skip
    chosen = list(originals)
    rng.shuffle(chosen)
    return copies, [(c.pnfsid, 0.0, 0, "default") for c in chosen]


def write(outdir: Path, copies: Iterable[Copy], requests: list[tuple]) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    with (outdir / "catalog.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
        for c in sorted(copies, key=lambda c: (c.volume, c.seq)):
            w.writerow([c.pnfsid, c.volume, c.seq, c.size, c.storage_class,
                        c.written_at.isoformat()])  # fmt: skip
    with (outdir / "requests.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "at", "priority", "queue"])
        w.writerows(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply file counts")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    copies, requests = scenario(args.scenario, rng, args.scale)
    write(args.outdir, copies, requests)
    print(f"{args.outdir}: {len(copies)} copies, {len(requests)} requests")


if __name__ == "__main__":
    main()

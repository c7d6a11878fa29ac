"""A dCache pool, modelled: N stages through ``tss-hsm-fast`` with -c:gets and p:delay.

dCache runs at most ``c:gets`` HSM script processes at once per pool. In poll mode a
script answering 72 gives its slot back and is called again after ``p:delay``; in block
mode it holds the slot until the file is on disk. The driver does the same with a pool of
``--gets`` threads and a timer queue, and samples what tssd sees pending in the pool's
queue every 0.25 s.

Set-up (not measured): the files are written to tape through the bulk API by a fast
tssd instance; then a second instance at ``--scale`` serves the campaign. Its drives are
first busy with an earlier campaign of ``--hold`` recalls per drive from other tapes (a
library is rarely idle; real mounts take 1-2 minutes), so the pool's hand-over races
against the tape, as it does in production.

    python benchmarks/dcache_driver.py --mode poll --files 5000 --gets 200 --delay 1
    python benchmarks/dcache_driver.py --mode block --files 5000 --gets 200 --delay 1
"""

from __future__ import annotations

import argparse
import heapq
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dcache_common import (
    BIN,
    File,
    Tssd,
    bulk_recall,
    dump,
    identical,
    migrate,
    progress,
    write_files,
)

from tssd.wire import WireError

QUEUE = "atlas"
STORES = ["atlas", "cms", "lhcb", "alice"]


class Pool:
    """The pool's stage scheduler: c:gets slots, p:delay between calls of one stage."""

    def __init__(
        self, tssd: Tssd, files: list[File], dest: Path, mode: str, delay: float, nice: int
    ) -> None:
        self.tssd, self.dest, self.mode, self.delay = tssd, dest, mode, delay
        # The pool is another host: on this one its scripts must not starve tssd.
        self.prefix = ["nice", "-n", str(nice)] if nice else []
        self.ready: list[tuple[float, int, File]] = [(0.0, i, f) for i, f in enumerate(files)]
        heapq.heapify(self.ready)
        self.lock = threading.Condition()
        self.left = len(files)
        self.calls = self.pending_answers = 0
        self.failures: dict[int, int] = {}
        self.call_s: list[float] = []

    def argv(self, f: File) -> list[str]:
        args = [*self.prefix, str(BIN / "tss-hsm-fast"), "get", f.pnfsid, str(self.dest / f.pnfsid),
                f"-si={f.storage_info()}", f"-uri={f.uri}", f"-tssd={self.tssd.socket}",
                f"-queue={QUEUE}", "-hsmInstance=osm", "-debug"]  # fmt: skip
        return [*args, "-mode=poll"] if self.mode == "poll" else args

    def worker(self) -> None:
        while True:
            with self.lock:
                while True:
                    if self.left == 0:
                        return
                    if self.ready and self.ready[0][0] <= time.monotonic():
                        _, seq, f = heapq.heappop(self.ready)
                        break
                    timeout = self.ready[0][0] - time.monotonic() if self.ready else 1.0
                    self.lock.wait(max(0.001, timeout))
            started = time.monotonic()
            rc = subprocess.run(self.argv(f), capture_output=True, check=False).returncode
            ended = time.monotonic()
            with self.lock:
                self.calls += 1
                self.call_s.append(ended - started)
                if rc == 72:
                    self.pending_answers += 1
                    heapq.heappush(self.ready, (ended + self.delay, seq, f))
                elif rc == 0:
                    self.left -= 1
                else:  # dCache reports the failure; its PoolManager retries much later
                    self.failures[rc] = self.failures.get(rc, 0) + 1
                    heapq.heappush(self.ready, (ended + 10 * self.delay, seq, f))
                self.lock.notify_all()


def sample(tssd: Tssd, pool: Pool, stop: threading.Event, seen: list[tuple[float, int]]) -> None:
    start = last = time.monotonic()
    while not stop.is_set():
        try:
            seen.append((time.monotonic() - start, tssd.queue_pending(QUEUE)))
        except WireError as exc:  # a missed sample is no reason to stop the benchmark
            progress(f"sample failed: {exc}")
        if seen and time.monotonic() - last > 30:
            last = time.monotonic()
            peak = max(n for _, n in seen)
            progress(f"pending in tssd {seen[-1][1]} (peak {peak}); stages left {pool.left}; "
                     f"calls {pool.calls}; failures {pool.failures}")  # fmt: skip
        stop.wait(0.25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["poll", "block"], default="poll")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--gets", type=int, default=200, help="c:gets")
    parser.add_argument("--delay", type=float, default=1.0, help="p:delay, seconds")
    parser.add_argument("--scale", type=float, default=0.0005, help="sim.time_scale")
    parser.add_argument("--drives", type=int, default=2)
    parser.add_argument("--hold", type=int, default=1500, help="earlier recalls per drive")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the pool's scripts")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tssd-dcache-"))
    tssd = Tssd(work / "home", {"TSSD_SIM_DRIVES": str(args.drives),
                                "TSSD_SIM_TIME_SCALE": "0.0005",
                                "TSSD_SCHEDULER_KEEP_MOUNTED_S": "2",
                                "TSSD_SCHEDULER_SHUTDOWN_GRACE_S": "2"})  # fmt: skip
    try:
        report = run(args, work, tssd)
    finally:
        tssd.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    dump(report)


def run(args: argparse.Namespace, work: Path, tssd: Tssd) -> dict[str, Any]:
    tssd.start()
    campaign = write_files(work / "source", 1, args.files, STORES, seed=1)
    hold_stores = [f"hold{d}" for d in range(args.drives)]
    hold = write_files(work / "hold-src", 10**6, args.hold * args.drives, hold_stores, seed=2)
    progress(f"set-up: writing {len(campaign) + len(hold)} files to tape")
    campaign = migrate(tssd, campaign)
    hold = migrate(tssd, hold)
    tssd.stop()
    tssd.env_extra["TSSD_SIM_TIME_SCALE"] = str(args.scale)
    tssd.start()
    progress(f"campaign: {len(hold)} earlier recalls, then {len(campaign)} stages ({args.mode})")

    bulk_recall(tssd, hold, work / "hold-dst", "hold")
    dest = work / "pool"
    dest.mkdir()
    pool = Pool(tssd, campaign, dest, args.mode, args.delay, args.nice)
    stop, seen = threading.Event(), []
    sampler = threading.Thread(target=sample, args=(tssd, pool, stop, seen), daemon=True)
    sampler.start()
    started = time.monotonic()
    workers = [threading.Thread(target=pool.worker) for _ in range(args.gets)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    makespan = time.monotonic() - started
    stop.set()
    sampler.join()
    good, total = identical(campaign, dest)
    peak_at, peak = max(seen, key=lambda s: s[1]) if seen else (0.0, 0)
    calls = sorted(pool.call_s)
    return {
        "mode": args.mode,
        "files": args.files,
        "c_gets": args.gets,
        "p_delay_s": args.delay,
        "time_scale": args.scale,
        "drives": args.drives,
        "hold_recalls": len(hold),
        "nice": args.nice,
        "max_pending_in_tssd": peak,
        "max_pending_at_s": round(peak_at, 1),
        "makespan_s": round(makespan, 1),
        "script_calls": pool.calls,
        "answers_72": pool.pending_answers,
        "calls_per_s": round(pool.calls / makespan, 1),
        "call_wall_ms_p50": round(1000 * calls[len(calls) // 2], 1) if calls else None,
        "failures_by_exit_code": pool.failures,
        "byte_identical_with_crcval": good,
        "checked": total,
    }


if __name__ == "__main__":
    main()

"""ENDIT intake benchmarks against a real ``tssd serve`` (simulated library, SQLite).

``record``: N stage request files dropped at once into ``request/`` (more than inotify's
queue holds: the overflow triggers a rescan); measured: time until tssd has recorded a
recall for every one of them.

``campaign``: the same recall campaign twice, on fresh daemons with the same catalog:
once through the bulk API, once through the directory (request files; tssd delivers into
``in/``). Measured: makespan from the first request to the last recall done, and MB/s.

The catalog (files on tape, no bytes: recalls deliver the simulator's filler data) is
written straight into the database, so set-up costs no tape writes.

    python benchmarks/endit_bench.py record --files 30000
    python benchmarks/endit_bench.py campaign --files 4000 --size 4000000 --drives 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import create_async_engine

from tssd.db.models import SimObject
from tssd.wire import Client, WireError

BIN = Path(sys.executable).parent
TAPES = 20


def pnfsid(i: int) -> str:
    return f"0000{i:020X}"


class Tssd:
    def __init__(self, root: Path, drives: int, scale: float, endit: Path | None) -> None:
        self.root, self.home = root, root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite+aiosqlite:///{self.home / 'tssd.db'}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}
        self.env |= {
            "TSSD_HOME": str(self.home),
            "TSSD_API_METRICS_TCP": "",
            "TSSD_SIM_DRIVES": str(drives),
            "TSSD_SIM_TIME_SCALE": str(scale),
            "TSSD_SCHEDULER_TICK_S": "0.2",
            "TSSD_LOG_LEVEL": "warning",
            "TSSD_LOG_FORMAT": "json",
            "TSSD_STORAGE_CLASSES": '[{name = "bench:tape"}]',
        }
        if endit is not None:
            self.env["TSSD_ENDIT_DIRECTORIES"] = f'[{{path = "{endit}", hsm_name = "pool1"}}]'
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.root / "tssd.log").open("ab")
        self.proc = subprocess.Popen([str(BIN / "tssd"), "serve"], env=self.env, stderr=log)
        while True:
            try:
                if self.client().call("GET", "/healthz", timeout=2).get("status") == "ok":
                    return
            except WireError:
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(120)
            self.proc = None

    def client(self) -> Client:
        return Client(str(self.home / "tssd.sock"))

    def counts(self) -> dict[str, int]:
        status = self.client().call("GET", "/v1/status", timeout=30)
        return dict(status["counts"].get("recall", {}))


def import_catalog(url: str, files: int, size: int) -> None:
    """*files* objects of *size* bytes spread over TAPES tapes, without data."""

    async def run() -> None:
        engine = create_async_engine(url)
        per_tape = -(-files // TAPES)
        now = datetime.now(UTC)
        rows: list[dict[str, Any]] = [
            {
                "bfid": f"bench{i:08d}",
                "pnfsid": pnfsid(i),
                "volume": f"SIM{i // per_tape:03d}L9",
                "seq": i % per_tape + 1,
                "offset": (i % per_tape) * size,
                "size": size,
                "adler32": None,
                "storage_class": "bench:tape@osm",
                "written_at": now,
                "has_data": False,
            }
            for i in range(files)
        ]
        async with engine.begin() as conn:
            for i in range(0, len(rows), 5000):
                await conn.execute(insert(SimObject), rows[i : i + 5000])
            await conn.execute(
                text("UPDATE sim_tapes SET storage_class = 'bench:tape@osm', used = 1")
            )
        await engine.dispose()

    asyncio.run(run())


def prepared(root: Path, args: argparse.Namespace, endit: Path | None) -> Tssd:
    if endit is not None:
        for sub in ("in", "out", "request", "trash"):
            (endit / sub).mkdir(parents=True, exist_ok=True)
    tssd = Tssd(root, args.drives, args.scale, endit)
    tssd.start()  # creates the schema and the scratch tapes
    tssd.stop()
    import_catalog(tssd.url, args.files, args.size)
    tssd.start()
    return tssd


def drop_requests(request_dir: Path, files: int, size: int) -> None:
    for i in range(files):
        body = {"file_size": size, "parent_pid": 1, "time": int(time.time())}
        body |= {"storage_class": "bench:tape@osm", "action": "recall", "path": "/pnfs/b"}
        (request_dir / pnfsid(i)).write_text(json.dumps(body))


def wait(tssd: Tssd, done: Any, timeout: float) -> float:
    start = time.monotonic()
    while not done(tssd.counts()):
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout} s: {tssd.counts()}")
        time.sleep(0.25)
    return time.monotonic() - start


def bench_record(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    endit = root / "endit"
    # No drive: recording alone is measured, the queue stays as recorded.
    args.drives = 0
    tssd = prepared(root, args, endit)
    try:
        start = time.monotonic()
        drop_requests(endit / "request", args.files, args.size)
        dropped = time.monotonic() - start
        recorded = wait(tssd, lambda c: sum(c.values()) >= args.files, 600)
    finally:
        tssd.stop()
    return {
        "files": args.files,
        "drop_s": round(dropped, 2),
        "recorded_s_after_drop_started": round(recorded + dropped, 2),
    }


def bench_campaign(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for via in ("api", "endit"):
        endit = root / via / "endit" if via == "endit" else None
        tssd = prepared(root / via, args, endit)
        try:
            start = time.monotonic()
            if endit is None:
                dest = root / via / "dest"
                dest.mkdir()
                body = {
                    "requests": [
                        {"kind": "recall", "pnfsid": pnfsid(i), "path": str(dest / pnfsid(i))}
                        for i in range(args.files)
                    ]
                }
                tssd.client().call("POST", "/v1/requests/bulk", body, timeout=600)
            else:
                drop_requests(endit / "request", args.files, args.size)
            wait(tssd, lambda c: c.get("done", 0) + c.get("failed", 0) >= args.files, 3600)
            makespan = time.monotonic() - start
            counts = tssd.counts()
        finally:
            tssd.stop()
        results[via] = {
            "files": args.files,
            "done": counts.get("done", 0),
            "makespan_s": round(makespan, 1),
            "throughput_mb_s": round(args.files * args.size / 1e6 / makespan, 1),
        }
        shutil.rmtree(root / via, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("record", "campaign"))
    parser.add_argument("--files", type=int, default=30000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--drives", type=int, default=4)
    parser.add_argument("--scale", type=float, default=0.02)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="endit-bench-") as tmp:
        fn = bench_record if args.what == "record" else bench_campaign
        print(json.dumps(fn(args, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()

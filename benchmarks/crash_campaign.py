"""Randomized crash campaign: SIGKILL ``tssd serve`` again and again under real load.

Usage: python benchmarks/crash_campaign.py [--db sqlite|postgres] [--kills 20] [--files 60]
                                           [--seed N] [--workdir DIR] [--fault-rate 0.05]

Real processes throughout: ``tssd serve`` on the simulated library, one ``tss-hsm put``
then one ``tss-hsm get`` per file (real bytes, adler32 in the storage info), re-issued
like dCache re-issues them when one exits non-zero. A killer thread SIGKILLs the daemon
at random moments and restarts it at once. Afterwards the invariants of
docs/reliability.md are checked and a JSON summary is printed:

- every request finished ``done``, exactly once (one ``-> done`` event per request, one
  done request per file and kind), nothing queued, active or failed;
- every file has exactly one object on tape (no duplicate copy was written);
- every recalled file has the bytes and the adler32 of its original, and no temporary
  ``.tssd-part`` file is left.

The pytest variant (tests/acceptance/test_crash_campaign.py) runs fewer kills.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tssd.testing import BIN, adler32_file, serve_env, spawn_serve, wait_ready


def storage_info(size: int, adler: str, store: str = "atlas", group: str = "tape") -> str:
    return (
        f"size={size};new=true;stored=false;sClass={store}:{group};cClass=-;hsm=osm;"
        f"accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;flag-c=1:{adler};"
        f"uid=1000;gid=1000;store={store};group={group};path=/pnfs/crash/{size};"
    )


@dataclass
class Node:
    """One ``tssd serve`` that can be killed and restarted."""

    home: Path
    db_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def env(self) -> dict[str, str]:
        settings = dict(
            TSSD_SIM_TIME_SCALE="0.01",
            TSSD_SIM_DRIVES="3",
            TSSD_SCHEDULER_TICK_S="0.2",
            TSSD_SCHEDULER_KEEP_MOUNTED_S="2",
            TSSD_BACKEND_RETRY_BASE_S="0.05",
            # Scheduling policies that hold a tape back on purpose are off: this campaign
            # is about crashes, and a held tape would only make it longer.
            TSSD_SCHEDULER_FILL_WAIT_S="0",
            TSSD_SCHEDULER_MOUNT_BUDGET_PER_DAY="0",
            # A fresh fault sequence per start: with one seed every restart would replay
            # the same first draws (and at 5 % perhaps never fail at all).
            TSSD_SIM_SEED=str(self.starts),
        )
        return serve_env(self.home, self.db_url, settings | self.extra_env)

    def start(self, timeout: float = 60.0) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.proc = spawn_serve(self.env, self.home / f"tssd-{self.starts:03d}.log")
        wait_ready(self.proc, self.home / "tssd.sock", timeout, self.log_tail, poll_s=0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)

    def log_tail(self) -> str:
        logs = sorted(self.home.glob("tssd-*.log"))
        return logs[-1].read_text(errors="replace")[-5000:] if logs else ""

    def events(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted(self.home.glob("tssd-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                # The last line of a killed process may be cut short.
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        found.append(json.loads(line))
        return found

    def hsm(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "tss-hsm"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


@dataclass
class Outcome:
    kills: int = 0
    puts_issued: int = 0
    gets_issued: int = 0
    reissued: int = 0
    uris: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def make_files(root: Path, n: int, rng: random.Random) -> list[tuple[str, Path, int, str]]:
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        size = int(2 ** rng.uniform(0, 21))  # 1 B .. 2 MiB
        pid = f"00C7{i:032X}"
        path = root / pid
        path.write_bytes(rng.randbytes(size))
        files.append((pid, path, size, adler32_file(path)))
    return files


def _until_ok(node: Node, out: Outcome, args: list[str], deadline: float) -> str:
    """Run tss-hsm until it exits 0, as dCache re-issues a failed store or restore."""
    first = True
    while True:
        res = node.hsm(*args)
        if res.returncode == 0:
            return res.stdout.strip()
        if res.returncode not in (1,) or time.monotonic() > deadline:
            raise RuntimeError(f"tss-hsm {args[0]} exited {res.returncode}: {res.stderr}")
        if first:
            first = False
        with node.lock:
            out.reissued += 1
        time.sleep(0.3)


def _one_file(
    node: Node, out: Outcome, f: tuple[str, Path, int, str], dest: Path, deadline: float
) -> None:
    pid, path, size, adler = f
    si = f"-si={storage_info(size, adler)}"
    with node.lock:
        out.puts_issued += 1
    uri = _until_ok(node, out, ["put", pid, str(path), si], deadline)
    with node.lock:
        out.uris[pid] = uri
        out.gets_issued += 1
    _until_ok(node, out, ["get", pid, str(dest / pid), si, f"-uri={uri}"], deadline)


def _killer(node: Node, out: Outcome, kills: int, rng: random.Random, done: threading.Event):
    while out.kills < kills and not done.is_set():
        if done.wait(rng.uniform(0.3, 2.0)):
            return
        node.kill()
        out.kills += 1
        node.start()


def run_campaign(
    node: Node, workdir: Path, *, kills: int, files: int, seed: int, timeout_s: float = 900
) -> dict[str, Any]:
    """Run the campaign on a started *node*; return the checked figures."""
    rng = random.Random(seed)
    originals = make_files(workdir / "pool", files, rng)
    dest = workdir / "restored"
    dest.mkdir(parents=True, exist_ok=True)
    out = Outcome()
    done = threading.Event()
    deadline = time.monotonic() + timeout_s
    killer = threading.Thread(target=_killer, args=(node, out, kills, rng, done), daemon=True)
    started = time.monotonic()
    killer.start()
    with ThreadPoolExecutor(8) as pool:
        futures = []
        for f in originals:
            futures.append(pool.submit(_one_file, node, out, f, dest, deadline))
            time.sleep(rng.uniform(0, 0.05))  # arrivals spread over the kills
        for fut in futures:
            fut.result()
    # Work finished before all the kills happened: kill on, over an idle daemon.
    killer.join()
    done.set()
    elapsed = time.monotonic() - started
    figures = check_invariants(node, originals, dest, out)
    figures.update(kills=out.kills, elapsed_s=round(elapsed, 1), reissued=out.reissued)
    return figures


def check_invariants(
    node: Node, originals: list[tuple[str, Path, int, str]], dest: Path, out: Outcome
) -> dict[str, Any]:
    rows = db_rows(node.db_url)
    requests, events, objects = rows["requests"], rows["events"], rows["objects"]
    states = Counter(r["state"] for r in requests)
    unfinished = [
        (r["kind"], r["pnfsid"], r["state"], r.get("error"))
        for r in requests
        if r["state"] != "done"
    ]
    assert set(states) == {"done"}, f"requests not all done: {dict(states)}: {unfinished[:8]}"
    per_file = Counter((r["kind"], r["pnfsid"]) for r in requests)
    repeated = {k: n for k, n in per_file.items() if n > 1}
    assert not repeated, f"a file has more than one request of a kind: {repeated}"
    assert len(per_file) == 2 * len(originals), (len(per_file), len(originals))
    done_events = Counter(
        e["request_id"] for e in events if e["to_state"] == "done" and e["from_state"] != "done"
    )
    twice = {k: n for k, n in done_events.items() if n != 1}
    assert not twice and len(done_events) == len(requests), f"done events {twice}"
    copies = Counter(o["pnfsid"] for o in objects)
    duplicates = {p: n for p, n in copies.items() if n > 1}
    assert not duplicates, f"duplicate tape copies: {duplicates}"
    by_pid = {o["pnfsid"]: o for o in objects}
    for pid, path, size, adler in originals:
        assert pid in by_pid, f"{pid} has no copy on tape"
        assert out.uris[pid].endswith(f"bfid={by_pid[pid]['bfid']}"), (pid, out.uris[pid])
        restored = dest / pid
        assert restored.stat().st_size == size, pid
        assert adler32_file(restored) == adler, pid
        assert restored.read_bytes() == path.read_bytes(), pid
        assert (dest / f"{pid}.crcval").read_text().split()[0] == adler, pid
    leftovers = list(dest.glob(".*tssd-part"))
    assert not leftovers, leftovers
    # A kill between an object's commit and its catalog record orphans the file; each
    # start removes those (tssd/backends/sim/tidy.py), so the store is the catalog's.
    stored = {p.name for p in (node.home / "sim" / "objects").iterdir()}
    orphaned = stored - {o["bfid"] for o in objects}
    assert not orphaned, f"object files outside the catalog: {sorted(orphaned)}"
    logged = Counter(e.get("event") for e in node.events())
    return {
        "files": len(originals),
        "requests": len(requests),
        "requests_lost": 0,
        "duplicate_copies": 0,
        "recalls_verified": len(originals),
        "daemon_starts": logged["daemon.ready"],
        "writes_found_on_tape": logged["sim.write.exists"],
        "faults_injected": sum(
            1
            for e in node.events()
            if e.get("event") in ("sim.mount.failed", "sim.read.failed", "sim.write.failed")
            and e.get("error_type", "TransientBackendError") == "TransientBackendError"
        ),
        "retries_logged": logged["backend.retry"],
        "orphaned_objects": len(orphaned),
        "orphans_removed_at_start": sum(
            e.get("removed", 0) for e in node.events() if e.get("event") == "sim.objects.orphans"
        ),
        "db_retries": logged["db.retry"],
        "requeued_at_startup": sum(
            1 for e in events if e["reason"] == "daemon restarted" and e["to_state"] == "queued"
        ),
    }


def db_rows(url: str) -> dict[str, list[dict[str, Any]]]:
    queries = {
        "requests": "SELECT id, kind, pnfsid, state, error FROM requests",
        "events": "SELECT request_id, from_state, to_state, reason FROM request_events",
        "objects": "SELECT bfid, pnfsid FROM sim_objects",
    }
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])
        conn.row_factory = sqlite3.Row
        try:
            return {k: [dict(r) for r in conn.execute(q)] for k, q in queries.items()}
        finally:
            conn.close()
    return asyncio.run(_pg_rows(url.replace("postgresql+asyncpg://", "postgresql://"), queries))


async def _pg_rows(url: str, queries: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return {k: [dict(r) for r in await conn.fetch(q)] for k, q in queries.items()}
    finally:
        await conn.close()


PG_ADMIN = os.environ.get("TSSD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_admin(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _pg_database(seed: int) -> tuple[str, str]:
    admin = PG_ADMIN
    name = f"tssd_crash_{seed}_{os.getpid()}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    return f"{base}/{name}", name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--files", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--fault-rate", type=float, default=0.0, help="sim.transient_error_rate (e.g. 0.05)"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(f"/tmp/tssd-crash-{args.db}-{args.seed}")
    workdir.mkdir(parents=True, exist_ok=False)
    dbname = None
    if args.db == "sqlite":
        url = f"sqlite+aiosqlite:///{workdir / 'tssd.db'}"
    else:
        url, dbname = _pg_database(args.seed)
    node = Node(home=workdir / "home", db_url=url)
    if args.fault_rate:
        node.extra_env["TSSD_SIM_TRANSIENT_ERROR_RATE"] = str(args.fault_rate)
    node.start()
    try:
        figures = run_campaign(node, workdir, kills=args.kills, files=args.files, seed=args.seed)
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()
        if dbname is not None:
            _pg_admin(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    summary = {"db": args.db, "seed": args.seed, "fault_rate": args.fault_rate, **figures}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

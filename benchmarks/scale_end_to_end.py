"""A million pending recalls through the real front doors (issue 22).

A real ``tssd serve`` (simulated library, PostgreSQL or SQLite) gets a catalog of
``--tapes`` x ``--files-per-tape`` objects (written into the simulated library's tables
while the daemon is stopped: the catalog is not what is measured), its default queue
paused, and is filled to ``--pending`` queued recalls through
``tssctl recall --file-list``. At each level of ``--levels`` the submit rate of each front
door is measured on a sample:

* bulk API: one ``tssctl recall --file-list`` of ``--bulk-sample`` files;
* shim poll mode: ``--shim-sample`` stages, one ``tss-hsm-fast get ... -mode=poll``
  process per file, ``--shim-procs`` at a time (as dCache forks them);
* endit intake: ``--endit-sample`` request files dropped into ``request/``, timed until
  tssd has recorded them all.

At the full level: the daemon's RSS, ``tssctl status`` / ``queues`` / ``requests list``
wall times (the command as an operator runs it), then restart to ready (SIGTERM, start,
``/healthz``), and last the decision latency: the queue is resumed, drives read and free
up for ``--decide-s`` seconds, and p50/p99 come from the daemon's own histogram
``tssd_schedule_decision_seconds``; then SIGTERM with the drives reading, timed until
the process exits (``shutdown``: busy and mounted drives, seconds, the shutdown events
the daemon logged at warning level).

With ``--prefill`` the ``--pending`` queued recalls are written into the database before
the daemon starts (PostgreSQL: ``COPY`` with the secondary indexes rebuilt after it; SQLite:
``executemany``), located on their catalog copies as tssd's intake leaves them, and no
door is sampled unless ``--levels`` is given: the figures at N pending in minutes.

    nice -n 10 .venv/bin/python benchmarks/scale_end_to_end.py --db postgres --pending 1000000
    nice -n 10 .venv/bin/python benchmarks/scale_end_to_end.py --db postgres --pending 1000000 \
        --prefill --time-scale 0.1 --decide-s 660

Prints one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from tssd.backends.sim.catalog import volume_name
from tssd.testing import BIN, serve_env, spawn_serve, stop_serve, wait_ready
from tssd.wire import Client

PG_ADMIN = os.environ.get("TSSD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
SIZE = 4096
STORE = "bench"
LEVELS = "0,250000,500000,750000"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pnfsid(i: int) -> str:
    return f"00C0{i:020X}"


class Daemon:
    def __init__(self, root: Path, url: str, env: dict[str, str]) -> None:
        self.root, self.home = root, root / "home"
        self.env = serve_env(self.home, url, env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def socket(self) -> Path:
        return self.home / "tssd.sock"

    def start(self) -> float:
        self.starts += 1
        log = self.root / f"tssd-{self.starts}.log"
        begin = time.monotonic()
        self.proc = spawn_serve(self.env, log)
        wait_ready(self.proc, self.socket, 600, lambda: log.read_text()[-3000:])
        return time.monotonic() - begin

    def stop(self) -> None:
        if self.proc is not None:
            stop_serve(self.proc, timeout=300)
            self.proc = None

    def stop_timed(self) -> dict[str, Any]:
        """SIGTERM with the drives as they are: seconds to exit, what the daemon logged."""
        assert self.proc is not None
        drives = self.client().call("GET", "/v1/drives")["drives"]
        busy = sum(d["state"] == "busy" for d in drives)
        mounted = sum(bool(d.get("volume")) for d in drives)
        log = self.root / f"tssd-{self.starts}.log"
        seen = len(log.read_text(errors="replace"))
        begin = time.monotonic()
        code = stop_serve(self.proc, timeout=1800)
        took = time.monotonic() - begin
        self.proc = None
        events = {}
        for line in log.read_text(errors="replace")[seen:].splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                events[event.get("event")] = {
                    k: v for k, v in event.items() if k not in ("event", "level", "timestamp")
                }
        return {
            "busy_drives": busy, "mounted_drives": mounted, "exit_code": code,
            "sigterm_to_exit_s": round(took, 1), "events": events,
        }  # fmt: skip

    def client(self) -> Client:
        return Client(str(self.socket), timeout=600)

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        """User + system CPU seconds the daemon has used."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def tssctl(self, *args: str) -> float:
        begin = time.monotonic()
        subprocess.run(
            [str(BIN / "tssctl"), "--tssd", str(self.socket), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            env=self.env,
        )
        return time.monotonic() - begin

    def tssctl_timed(self, *args: str) -> tuple[float, float]:
        """Wall seconds of a ``tssctl`` command and the CPU seconds of its process: on a
        loaded machine the wall time is mostly the wait for a core (start-up included)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = self.tssctl(*args)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    def id_of(self, pnfsid: str) -> int:
        page = self.client().call("GET", f"/v1/requests?pnfsid={pnfsid}&limit=10")
        return max(int(r["id"]) for r in page["requests"])

    def count_after(self, after: int) -> int:
        """Requests with an id above *after*, by id-ordered pages (cheap at any size)."""
        n = 0
        while True:
            page = self.client().call("GET", f"/v1/requests?limit=1000&after={after}")
            n += len(page["requests"])
            if page["next"] is None:
                return n
            after = page["next"]


def catalog_rows(tapes: int, per_tape: int) -> Any:
    """(bfid, pnfsid, volume, seq, offset, size, storage_class) of every copy."""
    for t in range(tapes):
        volume = volume_name(t, "L9")
        for s in range(per_tape):
            i = t * per_tape + s
            yield (f"b{i}", pnfsid(i), volume, s + 1, s * SIZE, SIZE, f"{STORE}:tape")


async def load_catalog_pg(url: str, tapes: int, per_tape: int) -> None:
    """The simulated library's catalog written straight into its tables (COPY)."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        at = datetime(2024, 1, 1, tzinfo=UTC)
        await conn.copy_records_to_table(
            "sim_tapes",
            columns=["volume", "storage_class", "capacity", "used", "next_seq", "full"],
            records=[
                (
                    volume_name(t, "L9"),
                    f"{STORE}:tape",
                    18 * 10**12,
                    per_tape * SIZE,
                    per_tape + 1,
                    True,
                )
                for t in range(tapes)
            ],
        )
        await conn.copy_records_to_table(
            "sim_objects",
            columns=[
                "bfid",
                "pnfsid",
                "volume",
                "seq",
                "offset",
                "size",
                "storage_class",
                "written_at",
                "has_data",
            ],
            records=((*row, at, False) for row in catalog_rows(tapes, per_tape)),
        )
        await conn.execute("ANALYZE sim_objects")
    finally:
        await conn.close()


def load_catalog_sqlite(path: Path, tapes: int, per_tape: int) -> None:
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO sim_tapes (volume, storage_class, capacity, used, next_seq, full) "
            "VALUES (?, ?, ?, ?, ?, 1)",
            [
                (volume_name(t, "L9"), f"{STORE}:tape", 18 * 10**12, per_tape * SIZE, per_tape + 1)
                for t in range(tapes)
            ],
        )
        db.executemany(
            "INSERT INTO sim_objects (bfid, pnfsid, volume, seq, offset, size, storage_class, "
            "written_at, has_data) VALUES (?, ?, ?, ?, ?, ?, ?, '2024-01-01 00:00:00.000000', 0)",
            catalog_rows(tapes, per_tape),
        )


def prefill_rows(files: Files, n: int, per_tape: int) -> Any:
    """(id, pnfsid, path, volume, position) of *n* queued recalls, located as tssd's
    intake locates them (the catalog copy: volume and file sequence number)."""
    for rid, i in enumerate(files.take(n), start=1):
        p = pnfsid(i)
        yield rid, p, f"{files.dest}/{p}", volume_name(i // per_tape, "L9"), i % per_tape + 1


#: A recall as ``tssctl recall`` creates it (no delivery: tssd renames the file itself).
PREFILL_COLUMNS = [
    "id", "kind", "state", "key", "pnfsid", "path", "size", "hsm_type", "hsm_instance",
    "queue", "priority", "volume", "position", "attempts", "created_at", "updated_at",
]  # fmt: skip


async def prefill_pg(url: str, files: Files, n: int, per_tape: int) -> None:
    """*n* queued, located recalls and their "submitted" events written with COPY while
    the daemon is stopped, the default queue paused, and the tables analysed."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        at = datetime.now(UTC)
        rows = list(prefill_rows(files, n, per_tape))
        # Indexes built once after the COPY, not maintained row by row (minutes saved).
        indexes = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY($1) "
            "AND indexname NOT LIKE 'pk_%'",
            ["requests", "request_events"],
        )
        for index in indexes:
            await conn.execute(f'DROP INDEX "{index["indexname"]}"')
        # The NOTIFY triggers are for live daemons (tssd.cluster): none is running.
        await conn.execute("ALTER TABLE requests DISABLE TRIGGER USER")
        await conn.copy_records_to_table(
            "requests",
            columns=PREFILL_COLUMNS,
            records=[
                (rid, "recall", "queued", p, p, path, SIZE, "osm", "osm", "default", 0,
                 vol, pos, 0, at, at)
                for rid, p, path, vol, pos in rows
            ],
        )  # fmt: skip
        await conn.copy_records_to_table(
            "request_events",
            columns=["id", "request_id", "at", "from_state", "to_state", "reason"],
            records=[(rid, rid, at, None, "queued", "submitted") for rid, *_ in rows],
        )
        await conn.execute("ALTER TABLE requests ENABLE TRIGGER USER")
        for index in indexes:
            await conn.execute(index["indexdef"])
        for table in ("requests", "request_events"):
            await conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {n})")
            await conn.execute(f"ANALYZE {table}")
        await conn.execute(
            "INSERT INTO queues (name, priority, paused) VALUES ('default', 0, true) "
            "ON CONFLICT (name) DO UPDATE SET paused = true"
        )
    finally:
        await conn.close()


def prefill_sqlite(path: Path, files: Files, n: int, per_tape: int) -> None:
    at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    rows = list(prefill_rows(files, n, per_tape))
    marks = ", ".join("?" * len(PREFILL_COLUMNS))
    with sqlite3.connect(path) as db:
        db.executemany(
            f"INSERT INTO requests ({', '.join(PREFILL_COLUMNS)}) VALUES ({marks})",
            ((rid, "recall", "queued", p, p, fpath, SIZE, "osm", "osm", "default", 0, vol, pos,
              0, at, at) for rid, p, fpath, vol, pos in rows),
        )  # fmt: skip
        db.executemany(
            "INSERT INTO request_events (id, request_id, at, from_state, to_state, reason) "
            "VALUES (?, ?, ?, NULL, 'queued', 'submitted')",
            ((rid, rid, at) for rid, *_ in rows),
        )
        db.execute(
            "INSERT INTO queues (name, priority, paused) VALUES ('default', 0, 1) "
            "ON CONFLICT (name) DO UPDATE SET paused = 1"
        )
        db.execute("ANALYZE")


class Files:
    """Hands out catalog files not yet asked for, in a shuffled tape order."""

    def __init__(self, total: int, dest: Path) -> None:
        self.total, self.next, self.dest = total, 0, dest
        self.last = 0

    def take(self, n: int) -> list[int]:
        if self.next + n > self.total:
            raise SystemExit(f"catalog exhausted: {self.next} + {n} > {self.total}")
        # A stride through the catalog spreads each sample over many tapes.
        taken = [(self.next + i) * 7919 % self.total for i in range(n)]
        self.next += n
        self.last = taken[-1]
        return taken

    def file_list(self, path: Path, ids: list[int]) -> Path:
        with path.open("w") as fh:
            fh.writelines(f"{pnfsid(i)} {self.dest}/{pnfsid(i)}\n" for i in ids)
        return path


def bulk(d: Daemon, files: Files, n: int) -> float:
    """Submit *n* recalls with ``tssctl recall --file-list``; files per second."""
    ids = files.take(n)
    chunk = 250_000
    begin = time.monotonic()
    for i in range(0, n, chunk):
        path = files.file_list(d.root / "list.txt", ids[i : i + chunk])
        d.tssctl("recall", "--file-list", str(path))
    return n / (time.monotonic() - begin)


def shim(d: Daemon, files: Files, n: int, procs: int) -> float:
    """Stages through ``tss-hsm-fast get -mode=poll``, *procs* processes at a time."""
    ids = files.take(n)
    fast = str(BIN / "tss-hsm-fast")

    def stage(i: int) -> int:
        p = pnfsid(i)
        si = (f"size={SIZE};new=false;stored=true;sClass={STORE}:tape;cClass=-;hsm=osm;"
              f"store={STORE};group=tape;")  # fmt: skip
        argv = [fast, "get", p, f"{files.dest}/{p}", f"-si={si}",
                f"-uri=osm://osm/?store={STORE}&group=tape&bfid=b{i}", "-mode=poll",
                f"-tssd={d.socket}"]  # fmt: skip
        return subprocess.run(argv, env=d.env, capture_output=True, check=False).returncode

    begin = time.monotonic()
    with ThreadPoolExecutor(procs) as pool:
        codes = list(pool.map(stage, ids))
    elapsed = time.monotonic() - begin
    bad = [c for c in codes if c != 72]
    if bad:
        raise SystemExit(f"tss-hsm-fast: {len(bad)} calls did not answer 72 (pending): {bad[:5]}")
    return n / elapsed


def endit(d: Daemon, files: Files, n: int, base: Path) -> float:
    """Request files into ENDIT's request/, timed until tssd has recorded them."""
    before = d.id_of(pnfsid(files.last))
    ids = files.take(n)
    begin = time.monotonic()
    for i in ids:
        body = {"file_size": SIZE, "parent_pid": 1, "time": int(time.time()), "path": "/p/b",
                "storage_class": f"{STORE}:tape@osm", "action": "recall"}  # fmt: skip
        (base / "request" / pnfsid(i)).write_text(json.dumps(body))
    deadline = begin + 1800
    while d.count_after(before) < n:
        if time.monotonic() > deadline:
            raise SystemExit("endit intake did not record the sample in 30 min")
        time.sleep(0.5)
    return n / (time.monotonic() - begin)


def doors(d: Daemon, files: Files, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Files per second through each door, and the daemon's CPU milliseconds per file: on a
    shared machine the wall-clock rate moves with the neighbours' load, the CPU cost less."""
    figures: dict[str, Any] = {}
    for door, n, go in (
        ("bulk", args.bulk_sample, lambda: bulk(d, files, args.bulk_sample)),
        ("shim", args.shim_sample, lambda: shim(d, files, args.shim_sample, args.shim_procs)),
        ("endit", args.endit_sample, lambda: endit(d, files, args.endit_sample, base)),
    ):
        cpu = d.cpu_s()
        figures[f"{door}_files_per_s"] = round(go())
        figures[f"{door}_cpu_ms_per_file"] = round((d.cpu_s() - cpu) * 1000 / n, 3)
    figures["rss_mb"] = round(d.rss_mb())
    return figures


def decision(d: Daemon) -> dict[str, Any]:
    """p50, p95, p99 and count of tssd_schedule_decision_seconds, from the daemon's /metrics."""
    conn, prefix = d.client()._connection(60)
    conn.request("GET", prefix + "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    buckets: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith("tssd_schedule_decision_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1] if buckets else 0.0

    def quantile(q: float) -> float | None:
        if not total:
            return None
        lo_edge, lo_count = 0.0, 0.0
        for edge, count in buckets:
            if count >= q * total:
                if edge == float("inf"):
                    return lo_edge
                share = (q * total - lo_count) / max(count - lo_count, 1e-9)
                return lo_edge + (edge - lo_edge) * share
            lo_edge, lo_count = edge, count
        return lo_edge

    figures: dict[str, Any] = {"decisions": int(total)}
    for q in (50, 95, 99):
        value = quantile(q / 100)
        figures[f"p{q}_ms"] = round(value * 1000, 2) if value is not None else None
    return figures


async def pg(*sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        for statement in sql:
            await conn.execute(statement)
    finally:
        await conn.close()


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    if args.db == "postgres":
        name = f"tssd_scale_{secrets.token_hex(4)}"
        asyncio.run(pg(f'CREATE DATABASE "{name}"'))
        base = PG_ADMIN.split("://", 1)[1].rsplit("/", 1)[0]
        url = f"postgresql+asyncpg://{base}/{name}"
    else:
        name, url = "", f"sqlite+aiosqlite:///{root / 'home' / 'tssd.db'}"
    request_dir = root / "endit"
    for sub in ("in", "out", "request", "trash"):
        (request_dir / sub).mkdir(parents=True, exist_ok=True)
    dest = root / "dest"
    dest.mkdir()
    env = {
        "TSSD_SIM_DRIVES": str(args.drives),
        "TSSD_SIM_TAPES": "0",
        "TSSD_SIM_TIME_SCALE": str(args.time_scale),
        "TSSD_LOG_LEVEL": "warning",
        "TSSD_ENDIT_DIRECTORIES": f'[{{path = "{request_dir}", hsm_name = "osm"}}]',
    }
    d = Daemon(root, url, env)
    report: dict[str, Any] = {"db": args.db, "pending": args.pending, "levels": {}}
    try:
        d.start()  # creates the schema
        d.stop()
        begin = time.monotonic()
        if args.db == "postgres":
            asyncio.run(load_catalog_pg(url, args.tapes, args.files_per_tape))
        else:
            load_catalog_sqlite(root / "home" / "tssd.db", args.tapes, args.files_per_tape)
        report["catalog_load_s"] = round(time.monotonic() - begin, 1)
        progress(f"catalog written in {report['catalog_load_s']} s")
        files = Files(args.tapes * args.files_per_tape, dest)
        if args.prefill:
            report["prefill_s"] = prefill(args, url, root, files)
        report["first_start_s"] = round(d.start(), 1)
        progress(f"daemon ready in {report['first_start_s']} s")
        d.tssctl("queues", "set", "default", "--pause")
        for level in args.levels:
            fill = level - files.next
            if fill > 0:
                progress(f"filling to {level} through tssctl recall")
                rate = bulk(d, files, fill)
                progress(f"filled {fill} at {rate:.0f} files/s")
            figures = doors(d, files, args, request_dir)
            report["levels"][level] = figures
            progress(f"at {level}: {figures}")
        if args.pending > files.next:
            progress(f"filling to {args.pending}")
            report["fill_last_files_per_s"] = round(bulk(d, files, args.pending - files.next))
        report["requests"] = files.next
        at_full(d, report, args.decide_s)
    finally:
        d.stop()
        if name and not args.keep:
            asyncio.run(pg(f'DROP DATABASE IF EXISTS "{name}"'))
    return report


def prefill(args: argparse.Namespace, url: str, root: Path, files: Files) -> float:
    """--prefill: the queued recalls written while the daemon is stopped; seconds taken."""
    begin = time.monotonic()
    if args.db == "postgres":
        asyncio.run(prefill_pg(url, files, args.pending, args.files_per_tape))
    else:
        prefill_sqlite(root / "home" / "tssd.db", files, args.pending, args.files_per_tape)
    took = round(time.monotonic() - begin, 1)
    progress(f"{args.pending} queued recalls written in {took} s")
    return took


def at_full(d: Daemon, report: dict[str, Any], decide_s: float) -> None:
    """RSS, listing latencies, restart to ready, decision latency at the full level."""
    report["rss_mb"] = round(d.rss_mb())
    report["load_average"] = {"at_full": os.getloadavg()}
    listing: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for label, argv in (
        ("status", ("status",)),
        ("status_again", ("status",)),
        ("queues", ("queues", "list")),
        ("requests_list", ("requests", "list")),
        ("requests_list_queued", ("requests", "list", "--state", "queued")),
        ("requests_list_failed", ("requests", "list", "--state", "failed")),
        ("requests_list_tape", ("requests", "list", "--tape", volume_name(7, "L9"))),
        ("tapes", ("tapes", "list")),
    ):
        wall, used = d.tssctl_timed(*argv)
        listing[label], cpu[label] = round(wall, 3), round(used, 3)
    report["tssctl_s"] = listing
    report["tssctl_cpu_s"] = cpu
    # The same pages from this process: the daemon's answer without tssctl's start-up.
    api: dict[str, float] = {}
    for label, path in (
        ("status", "/v1/status"),
        ("queues", "/v1/queues"),
        ("requests_list", "/v1/requests?limit=100"),
        ("requests_list_queued", "/v1/requests?limit=100&state=queued"),
        ("requests_list_failed", "/v1/requests?limit=100&state=failed"),
        ("tapes", "/v1/tapes"),
    ):
        begin = time.monotonic()
        d.client().call("GET", path)
        api[label] = round(time.monotonic() - begin, 3)
    report["api_s"] = api
    progress(f"at {report['requests']}: rss {report['rss_mb']} MB, tssctl {listing}, api {api}")
    d.stop()
    report["restart_to_ready_s"] = round(d.start(), 2)
    progress(f"restart to ready {report['restart_to_ready_s']} s")
    d.tssctl("queues", "set", "default", "--resume")
    time.sleep(decide_s)
    report["decision"] = decision(d)
    report["slow_decisions"] = slow_decisions(d)
    report["load_average"]["decision"] = os.getloadavg()
    report["rss_mb_reading"] = round(d.rss_mb())
    progress(f"decision {report['decision']}")
    report["load_average"]["shutdown"] = os.getloadavg()
    report["shutdown"] = d.stop_timed()
    progress(f"shutdown {report['shutdown']}")


def slow_decisions(d: Daemon, keep: int = 10) -> dict[str, Any]:
    """The daemon's ``scheduler.decision_slow`` events: how many, and the slowest with
    where their time went (before the pass began, each step of the pass)."""
    events = []
    for line in (d.root / f"tssd-{d.starts}.log").read_text().splitlines():
        if "scheduler.decision_slow" in line:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    events.sort(key=lambda e: -float(e.get("seconds", 0)))
    for e in events:
        for drop in ("event", "level", "logger"):
            e.pop(drop, None)
    return {"count": len(events), "slowest": events[:keep]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--levels", default=None,
                        help=f"comma-separated pending levels to sample the doors at (default "
                             f"{LEVELS}; none with --prefill)")  # fmt: skip
    parser.add_argument("--prefill", action="store_true",
                        help="write the --pending queued recalls into the database before "
                             "tssd serve starts (COPY / executemany), not through tssctl: "
                             "for the figures at N pending, in minutes")  # fmt: skip
    parser.add_argument("--tapes", type=int, default=5000)
    parser.add_argument("--files-per-tape", type=int, default=200)
    parser.add_argument("--bulk-sample", type=int, default=10_000)
    parser.add_argument("--shim-sample", type=int, default=2000)
    parser.add_argument("--shim-procs", type=int, default=16)
    parser.add_argument("--endit-sample", type=int, default=2000)
    parser.add_argument("--drives", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--decide-s", type=float, default=90.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory/database")
    args = parser.parse_args()
    levels = args.levels if args.levels is not None else "" if args.prefill else LEVELS
    args.levels = [int(x) for x in levels.split(",") if x]
    root = Path(tempfile.mkdtemp(prefix="tssd-scale-"))
    report = run(args, root)  # on an error the work directory stays, with the daemon logs
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

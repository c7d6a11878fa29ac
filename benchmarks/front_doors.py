"""A million recalls through the front doors of a fresh install, on top of a long history.

What a new site does, step by step, and nothing a site would not do: a fresh database
(``tssd db upgrade``), a history of ``--history`` finished requests (loaded directly as
old rows, one event each: a site's history is old, and intake of it is not what is
measured), a real ``tssd serve`` on the simulated library, a ``--catalog``-object catalog
through ``tssctl catalog import``, then ``--requests`` recalls through ``tssctl recall
--file-list`` in chunks of ``--chunk``. No prefill, and no ``ANALYZE`` by the benchmark:
whatever statistics the planner has are the ones tssd and the server keep themselves.

Printed per chunk: its seconds, the daemon's RSS and CPU, the CPU of the database
server's backends serving this database (PostgreSQL; on SQLite the database is inside
tssd's CPU), and with ``--running`` the drives busy. At the end: the intake rate,
``pg_stat_user_tables`` (sequential and index scans per table) before and after the
intake, and at depth ``tssctl status``, ``tssctl requests list``, ``tssctl why`` and a
``tss-hsm get`` in poll mode beside the same call made before the intake: right after the
intake, while tssd still locates its backlog, and again once every recall is located (with
the seconds that took).

By default the default queue is paused (intake alone); ``--running`` leaves it running
on ``--drives`` simulated drives at ``--time-scale``, so that intake and claims share the
database, and reports the drives busy per chunk and the requests done.

    nice -n 10 .venv/bin/python benchmarks/front_doors.py --db postgres \\
        --catalog 1000000 --requests 1000000 --history 10000000
    nice -n 10 .venv/bin/python benchmarks/front_doors.py --db sqlite --requests 200000
    # PostgreSQL with autovacuum on, a cluster of its own (default settings):
    .venv/bin/python benchmarks/front_doors.py --start-cluster /var/tmp/pg-av --port 5439
    nice -n 10 .venv/bin/python benchmarks/front_doors.py \\
        --db postgresql://postgres@127.0.0.1:5439/postgres ...
    .venv/bin/python benchmarks/front_doors.py --stop-cluster /var/tmp/pg-av

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from scale_end_to_end import SIZE, STORE, Daemon, Files, pnfsid, progress

from tssd.backends.sim.catalog import volume_name
from tssd.testing import BIN

PG_ADMIN = os.environ.get("TSSD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
HOT = ("requests", "request_events", "sim_objects", "sim_tapes")
HISTORY_COLUMNS = [
    "id", "kind", "state", "key", "pnfsid", "path", "size", "hsm_type", "hsm_instance",
    "queue", "priority", "volume", "position", "attempts", "created_at", "started_at",
    "finished_at", "updated_at",
]  # fmt: skip
POLL_CALLS = 15
VIEW_ROUNDS = 5
PENDING = 72  # tss-hsm's exit code for "staging, ask again"


# -- the second PostgreSQL cluster --------------------------------------------------------


def start_cluster(data: Path, port: int) -> None:
    """``initdb`` (default settings, trust auth on localhost) and ``pg_ctl start`` as the
    postgres user: a server with autovacuum on, as a site runs one."""
    as_pg = ["runuser", "-u", "postgres", "--"]
    if not (data / "PG_VERSION").exists():
        data.mkdir(parents=True, exist_ok=True)
        shutil.chown(data, "postgres", "postgres")
        subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(data), "--auth=trust"],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    options = f"-p {port} -c listen_addresses=127.0.0.1 -k /tmp"
    subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options,
                    "-l", str(data / "server.log"), "-w", "start"], check=True)  # fmt: skip
    print(f"postgresql://postgres@127.0.0.1:{port}/postgres")


def stop_cluster(data: Path) -> None:
    subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D",
                    str(data), "-m", "fast", "-w", "stop"], check=True)  # fmt: skip


# -- the database -------------------------------------------------------------------------


async def pg_execute(admin: str, sql: str) -> None:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def history_rows(n: int) -> Iterator[tuple[Any, ...]]:
    """*n* recalls finished in the last 25 days (inside the default retention), of other
    files than the campaign's."""
    now = datetime.now(UTC)
    for i in range(1, n + 1):
        p = f"00D0{i:020X}"
        finished = now - timedelta(seconds=60 + (i * 7919) % (25 * 86400))
        created = finished - timedelta(hours=2)
        yield (i, "recall", "done", p, p, f"/old/{p}", SIZE, "osm", "osm", "default", 0,
               volume_name(i % 1000, "L9"), i % 1000 + 1, 1, created, created, finished,
               finished)  # fmt: skip


def _batches(rows: Iterator[tuple[Any, ...]], size: int = 200_000) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def load_history_pg(url: str, n: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        # The NOTIFY triggers are for live daemons (none runs yet).
        await conn.execute("ALTER TABLE requests DISABLE TRIGGER USER")
        for batch in _batches(history_rows(n)):
            await conn.copy_records_to_table("requests", records=batch, columns=HISTORY_COLUMNS)
            events = [(r[0], r[16], "active", "done", "read") for r in batch]
            await conn.copy_records_to_table(
                "request_events", records=events,
                columns=["request_id", "at", "from_state", "to_state", "reason"],
            )  # fmt: skip
        await conn.execute("ALTER TABLE requests ENABLE TRIGGER USER")
        await conn.execute("SELECT setval('requests_id_seq', $1)", max(n, 1))
    finally:
        await conn.close()


def _sqlite_value(value: Any) -> Any:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(value, datetime) else value


def load_history_sqlite(path: Path, n: int) -> None:
    names = ", ".join(HISTORY_COLUMNS)
    marks = ", ".join("?" for _ in HISTORY_COLUMNS)
    with sqlite3.connect(path) as db:
        for batch in _batches(history_rows(n)):
            db.executemany(f"INSERT INTO requests ({names}) VALUES ({marks})",
                           ([_sqlite_value(v) for v in row] for row in batch))  # fmt: skip
            db.executemany(
                "INSERT INTO request_events (request_id, at, from_state, to_state, reason) "
                "VALUES (?, ?, 'active', 'done', 'read')",
                ((r[0], _sqlite_value(r[16])) for r in batch),
            )


async def table_scans(url: str) -> dict[str, dict[str, int]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0) AS idx_scan, "
            "n_live_tup, coalesce(autoanalyze_count, 0) + coalesce(analyze_count, 0) AS "
            "analyses FROM pg_stat_user_tables WHERE relname = ANY($1)",
            list(HOT),
        )
        return {r["relname"]: {k: int(r[k]) for k in list(r.keys())[1:]} for r in rows}
    finally:
        await conn.close()


async def backend_pids(url: str, name: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 OR backend_type = "
            "'autovacuum worker'",
            name,
        )
        return [r["pid"] for r in rows]
    finally:
        await conn.close()


def cpu_of(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


class ServerCpu:
    """CPU seconds of the PostgreSQL backends serving the database (and autovacuum), as
    the sum of what each process used since it was first seen."""

    def __init__(self, url: str | None, name: str) -> None:
        self.url, self.name = url, name
        self.seen: dict[int, float] = {}
        self.total = 0.0

    def sample(self) -> float:
        if self.url is None:
            return 0.0
        now = cpu_of(asyncio.run(backend_pids(self.url, self.name)))
        for pid, used in now.items():
            self.total += used - self.seen.get(pid, 0.0)
            self.seen[pid] = used
        return self.total


# -- the run ------------------------------------------------------------------------------


def catalog_csv(path: Path, n: int, per_tape: int) -> Path:
    with path.open("w") as fh:
        fh.write("pnfsid,volume,seq,size,storage_class,written_at\n")
        for i in range(n):
            fh.write(f"{pnfsid(i)},{volume_name(i // per_tape, 'L9')},{i % per_tape + 1},"
                     f"{SIZE},{STORE}:tape,2024-01-01T00:00:00+00:00\n")  # fmt: skip
    return path


def poll_gets(d: Daemon, files: Files, n: int) -> dict[str, float]:
    """*n* first calls of ``tss-hsm get`` in poll mode, one at a time: seconds each."""
    times = []
    for i in files.take(n):
        p = pnfsid(i)
        si = (f"size={SIZE};new=false;stored=true;sClass={STORE}:tape;cClass=-;hsm=osm;"
              f"store={STORE};group=tape;")  # fmt: skip
        argv = [str(BIN / "tss-hsm"), "get", p, f"{files.dest}/{p}", f"-si={si}",
                f"-uri=osm://osm/?store={STORE}&group=tape&bfid=b{i}", "-mode=poll",
                f"-tssd={d.socket}"]  # fmt: skip
        begin = time.monotonic()
        code = subprocess.run(argv, env=d.env, capture_output=True, check=False).returncode
        times.append(time.monotonic() - begin)
        if code != PENDING:
            raise SystemExit(f"tss-hsm get answered {code}, not {PENDING} (pending)")
    return {"median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4)}


def drives_busy(d: Daemon) -> int:
    drives = d.client().call("GET", "/v1/drives")["drives"]
    return sum(drive["state"] == "busy" for drive in drives)


def intake(d: Daemon, files: Files, args: argparse.Namespace, cpu: ServerCpu) -> list[Any]:
    chunks = []
    for start in range(0, args.requests, args.chunk):
        n = min(args.chunk, args.requests - start)
        path = files.file_list(d.root / "list.txt", files.take(n))
        db_before, tssd_before = cpu.sample(), d.cpu_s()
        took = d.tssctl("recall", "--file-list", str(path))
        row = {"n": start + n, "s": round(took, 2), "rss_mb": round(d.rss_mb()),
               "tssd_cpu_s": round(d.cpu_s() - tssd_before, 2),
               "db_cpu_s": round(cpu.sample() - db_before, 2)}  # fmt: skip
        if args.running:
            row["drives_busy"] = drives_busy(d)
        chunks.append(row)
        progress(json.dumps(row))
    return chunks


def summary(chunks: list[dict[str, Any]], elapsed: float) -> dict[str, Any]:
    first = [c["s"] for c in chunks[:10]]
    last = [c["s"] for c in chunks[-10:]]
    return {
        "requests": chunks[-1]["n"] if chunks else 0,
        "intake_s": round(elapsed, 1),
        "files_per_s": round(chunks[-1]["n"] / elapsed) if chunks else 0,
        "first_10_mean_s": round(statistics.mean(first), 2) if first else None,
        "last_10_mean_s": round(statistics.mean(last), 2) if last else None,
        "last_over_first": round(statistics.mean(last) / statistics.mean(first), 2)
        if first
        else None,
        "max_rss_mb": max((c["rss_mb"] for c in chunks), default=0),
    }


def at_depth(d: Daemon, files: Files, report: dict[str, Any], *, polls: bool = True) -> None:
    middle = d.id_of(pnfsid(files.last))
    timed = {}
    for label, argv in (
        ("status", ("status",)),
        ("requests_list", ("requests", "list")),
        ("requests_list_queued", ("requests", "list", "--state", "queued")),
        ("why", ("why", str(middle))),
    ):
        # Each view VIEW_ROUNDS times: one wall time on a shared machine says little.
        runs = [d.tssctl_timed(*argv) for _ in range(VIEW_ROUNDS)]
        walls = [wall for wall, _ in runs]
        timed[label] = {
            "wall_s": round(statistics.median(walls), 3),
            "wall_max_s": round(max(walls), 3),
            "cpu_s": round(statistics.median(used for _, used in runs), 3),
        }
    report["at_depth_tssctl"] = timed
    report["rss_mb_at_depth"] = round(d.rss_mb())
    if not polls:
        return
    report["poll_get_at_depth"] = poll_gets(d, files, POLL_CALLS)
    # Right after a bulk intake tssd is still locating its backlog (which tape copy each
    # recall reads), and the poll shares two cores with that; once it is located the
    # queue is what a pool's polls meet day to day. Both are reported.
    report["unlocated_after_intake"] = unlocated(d)
    begin = time.monotonic()
    while unlocated(d):
        time.sleep(1)
    report["located_after_s"] = round(time.monotonic() - begin, 1)
    report["poll_get_located"] = poll_gets(d, files, POLL_CALLS)


def ratios(report: dict[str, Any]) -> None:
    """The poll calls at depth over the same calls on an empty queue (medians)."""
    empty = report["poll_get_empty"]["median_s"]
    for when in ("at_depth", "located"):
        report[f"poll_ratio_{when}"] = round(report[f"poll_get_{when}"]["median_s"] / empty, 2)


def unlocated(d: Daemon) -> int:
    """Queued recalls with no tape copy chosen yet, read by the benchmark itself (a
    read-only connection of its own; tssd reports no such figure)."""
    query = (
        "SELECT count(*) FROM requests WHERE state = 'queued' AND kind = 'recall' "
        "AND volume IS NULL"
    )
    url = d.env["TSSD_DATABASE_URL"]
    if url.startswith("sqlite"):
        with sqlite3.connect(f"file:{url.split(':///', 1)[1]}?mode=ro", uri=True) as conn:
            return int(conn.execute(query).fetchone()[0])
    return asyncio.run(_pg_count(url.replace("postgresql+asyncpg://", "postgresql://", 1), query))


async def _pg_count(url: str, query: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(query))
    finally:
        await conn.close()


def fresh_database(d: Daemon, plain: str, history: int, source: str | None = None) -> float:
    """``tssd db upgrade`` of the empty database, then the history: seconds it took.
    With *source* (``--history-from``) the history is a copy: of that database on
    PostgreSQL (made by :func:`new_database`), of that file on SQLite."""
    d.home.mkdir(parents=True, exist_ok=True)
    if source and not plain:
        shutil.copyfile(source, d.home / "tssd.db")
    subprocess.run([str(BIN / "tssd"), "db", "upgrade"], env=d.env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    if source:
        progress(f"history of {history} copied from {source}")
        return 0.0
    begin = time.monotonic()
    if plain:
        asyncio.run(load_history_pg(plain, history))
    else:
        load_history_sqlite(d.home / "tssd.db", history)
    took = round(time.monotonic() - begin, 1)
    progress(f"history of {history} loaded in {took} s")
    return took


def save_history(args: argparse.Namespace) -> None:
    """A database of ``tssd db upgrade`` and the history, for ``--history-from``: a SQLite
    file at ``--save-history``, or (``--db`` PostgreSQL) a database of that name."""
    root = Path(tempfile.mkdtemp(prefix="tssd-fdh-"))
    target = str(args.save_history)
    try:
        if args.db == "sqlite":
            url = f"sqlite+aiosqlite:///{root / 'home' / 'tssd.db'}"
            took = fresh_database(Daemon(root, url, {}), "", args.history)
            db = sqlite3.connect(root / "home" / "tssd.db")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # one file holds it all
            db.close()
            shutil.move(root / "home" / "tssd.db", target)
        else:
            admin = PG_ADMIN if args.db == "postgres" else args.db
            asyncio.run(pg_execute(admin, f'CREATE DATABASE "{target}"'))
            plain = f"{admin.rsplit('/', 1)[0]}/{target}"
            url = plain.replace("postgresql://", "postgresql+asyncpg://", 1)
            took = fresh_database(Daemon(root, url, {}), plain, args.history)
        print(json.dumps({"history": args.history, "saved": target, "load_s": took}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sim_env(args: argparse.Namespace) -> dict[str, str]:
    return {
        "TSSD_SIM_DRIVES": str(args.drives),
        "TSSD_SIM_TAPES": "0",
        "TSSD_SIM_TIME_SCALE": str(args.time_scale),
        "TSSD_LOG_LEVEL": "info",
        "TSSD_LIMITS_CATALOG_IMPORT_MAX_BYTES": str(4 << 30),
    }


def new_database(args: argparse.Namespace, admin: str, root: Path) -> tuple[str, str, str]:
    """The database's name, its plain URL (PostgreSQL; "" for SQLite) and tssd's URL."""
    name = f"tssd_fd_{secrets.token_hex(4)}"
    if args.db == "sqlite":
        return name, "", f"sqlite+aiosqlite:///{root / 'home' / 'tssd.db'}"
    # A history already loaded (the same --history) is copied, not loaded again:
    # generating 10 M rows takes longer than the run it stands under.
    template = f' TEMPLATE "{args.history_from}"' if args.history_from else ""
    asyncio.run(pg_execute(admin, f'CREATE DATABASE "{name}"{template}'))
    progress(f"database {name}")
    plain = f"{admin.rsplit('/', 1)[0]}/{name}"
    return name, plain, plain.replace("postgresql://", "postgresql+asyncpg://", 1)


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    postgres = args.db != "sqlite"
    admin = PG_ADMIN if args.db == "postgres" else args.db
    name, plain, url = new_database(args, admin, root)
    dest = root / "dest"
    dest.mkdir()
    d = Daemon(root, url, sim_env(args))
    report: dict[str, Any] = {"db": "sqlite" if not postgres else admin.split("@")[-1],
                              "catalog": args.catalog, "requests": args.requests,
                              "history": args.history, "chunk": args.chunk,
                              "running": args.running}  # fmt: skip
    cpu = ServerCpu(plain or None, name)
    try:
        report["history_load_s"] = fresh_database(d, plain, args.history, args.history_from)
        d.start()
        if not args.running:
            d.tssctl("queues", "set", "default", "--pause")
        csv = catalog_csv(root / "catalog.csv", args.catalog, args.per_tape)
        report["catalog_import_s"] = round(
            d.tssctl("catalog", "import", "--replace", "--server-path", str(csv)), 1
        )
        progress(f"catalog of {args.catalog} imported in {report['catalog_import_s']} s")
        files = Files(args.catalog, dest)
        report["poll_get_empty"] = poll_gets(d, files, POLL_CALLS)
        if postgres:
            # What the daemon's own periodic reads scan with no intake (the background
            # count, the planner's resync: whole-set reads by design), to tell them apart.
            idle = asyncio.run(table_scans(plain))
            time.sleep(args.idle_s)
            report["scans_before"] = asyncio.run(table_scans(plain))
            report["seq_scans_idle"] = {
                "seconds": args.idle_s,
                **{t: report["scans_before"][t]["seq_scan"] - idle[t]["seq_scan"] for t in HOT},
            }
        begin = time.monotonic()
        chunks = intake(d, files, args, cpu)
        report["intake"] = summary(chunks, time.monotonic() - begin)
        report["intake"]["tssd_cpu_s"] = round(sum(c["tssd_cpu_s"] for c in chunks), 1)
        report["intake"]["db_cpu_s"] = round(sum(c["db_cpu_s"] for c in chunks), 1)
        report["chunks"] = chunks
        progress(json.dumps(report["intake"]))
        if postgres:
            time.sleep(1)
            report["scans_after"] = asyncio.run(table_scans(plain))
            report["seq_scans_during_intake"] = {
                t: report["scans_after"][t]["seq_scan"] - report["scans_before"][t]["seq_scan"]
                for t in HOT
            }
        at_depth(d, files, report)
        ratios(report)
        if args.running:
            report["metrics"] = d.client().call("GET", "/v1/status")
        report["load_average"] = os.getloadavg()
    finally:
        d.stop()
        if postgres and not args.keep:
            asyncio.run(pg_execute(admin, f'DROP DATABASE IF EXISTS "{name}"'))
    return report


def views_of(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The at-depth figures again, on a copy of a database a ``--keep`` run left (the same
    ``--catalog`` and ``--requests``), with this tree's tssd: the views and the poll-mode
    get at depth. The same get on an empty queue: with ``--empty-from`` (the history
    database of ``--save-history``) on a second daemon over a copy of it, running beside
    the first, the calls alternating between the two (``poll_paired``); without it, once
    the copy's open requests are cancelled (which leaves a million dead index entries
    behind with autovacuum off: an empty queue that is not a new one)."""
    admin = PG_ADMIN if args.db == "postgres" else args.db
    copies = [copy_database(admin, args.views_of)]
    d = Daemon(root, copies[0][1], sim_env(args))
    report: dict[str, Any] = {"views_of": args.views_of, "requests": args.requests}
    files = Files(args.catalog, root / "dest")
    files.dest.mkdir()
    # The run handed out POLL_CALLS, then --requests, then 2 x POLL_CALLS more files: new
    # ones for the calls here (a file already asked for would attach, not create).
    files.take(3 * POLL_CALLS + args.requests)
    try:
        d.home.mkdir(parents=True, exist_ok=True)
        report["start_s"] = round(d.start(), 1)
        at_depth(d, files, report, polls=not args.empty_from)
        if args.empty_from:
            copies.append(copy_database(admin, args.empty_from))
            # The same pool root as the first daemon: the calls' files go to one place.
            env = {**sim_env(args), "TSSD_API_POOL_ROOTS": str(root)}
            empty = Daemon(root / "empty", copies[1][1], env)
            empty.home.mkdir(parents=True, exist_ok=True)
            empty.start()
            try:
                # Up to the end of the catalog: each call at depth asks for a new file.
                n = min(3 * POLL_CALLS, files.total - files.next)
                report["poll_paired"] = paired(d, empty, files, n)
            finally:
                empty.stop()
        else:
            d.stop()
            report["cancelled_for_empty"] = asyncio.run(cancel_open(copies[0][0]))
            d.start()
            report["poll_get_empty"] = poll_gets(d, files, POLL_CALLS)
            ratios(report)
        report["load_average"] = os.getloadavg()
    finally:
        d.stop()
        for plain, _ in copies:
            asyncio.run(pg_execute(admin, f'DROP DATABASE IF EXISTS "{plain.rsplit("/", 1)[1]}"'))
    return report


def copy_database(admin: str, template: str) -> tuple[str, str]:
    """A new PostgreSQL database copied from *template*: its plain URL and tssd's."""
    name = f"tssd_fdv_{secrets.token_hex(4)}"
    asyncio.run(pg_execute(admin, f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    plain = f"{admin.rsplit('/', 1)[0]}/{name}"
    return plain, plain.replace("postgresql://", "postgresql+asyncpg://", 1)


def paired(depth: Daemon, empty: Daemon, files: Files, n: int) -> dict[str, Any]:
    """*n* poll calls to each daemon, alternating, so that both meet the same machine:
    the medians of each and the median of the per-pair ratios."""
    # The empty daemon has no catalog: any pnfsid makes a new request there.
    elsewhere = Files(10**9, files.dest)
    elsewhere.take(files.total)
    at, bare = [], []
    for _ in range(n):
        at.append(poll_gets(depth, files, 1)["median_s"])
        bare.append(poll_gets(empty, elsewhere, 1)["median_s"])
    ratio = statistics.median(a / b for a, b in zip(at, bare, strict=True))
    return {
        "depth": {"median_s": round(statistics.median(at), 4), "min_s": min(at)},
        "empty": {"median_s": round(statistics.median(bare), 4), "min_s": min(bare)},
        "pair_ratio_median": round(ratio, 2),
        "calls": n,
    }


async def cancel_open(url: str) -> int:
    """Every open request of the copy cancelled (in SQL: a benchmark's preparation; no
    ``ANALYZE``, as everywhere in this benchmark)."""
    conn = await asyncpg.connect(url)
    try:
        done = await conn.execute(
            "UPDATE requests SET state = 'cancelled', finished_at = now(), updated_at = now() "
            "WHERE state IN ('queued', 'active')"
        )
        return int(done.split()[-1])
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite",
                        help="sqlite, postgres (TSSD_TEST_PG's server) or a server's "
                             "postgresql:// admin URL")  # fmt: skip
    parser.add_argument("--catalog", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--per-tape", type=int, default=1000)
    parser.add_argument("--running", action="store_true",
                        help="the queue runs on the simulated drives during intake")  # fmt: skip
    parser.add_argument("--drives", type=int, default=4)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    parser.add_argument(
        "--idle-s", type=float, default=60.0, help="PostgreSQL: seconds counted before intake"
    )
    parser.add_argument("--start-cluster", type=Path, metavar="DIR")
    parser.add_argument("--stop-cluster", type=Path, metavar="DIR")
    parser.add_argument("--port", type=int, default=5439)
    parser.add_argument("--history-from", metavar="DATABASE",
                        help="copy a database holding only the --history rows (tssd db "
                             "upgrade and the history) instead of loading them: a "
                             "PostgreSQL database's name, or a SQLite file "
                             "(--save-history makes one)")  # fmt: skip
    parser.add_argument("--save-history", metavar="FILE_OR_DATABASE",
                        help="make a database of tssd db upgrade and the --history rows "
                             "for --history-from (a SQLite file, or with --db PostgreSQL "
                             "a database of that name), and stop")  # fmt: skip
    parser.add_argument("--empty-from", metavar="DATABASE",
                        help="with --views-of: the empty queue is a second daemon on a "
                             "copy of this history database (--save-history's)")  # fmt: skip
    parser.add_argument("--views-of", metavar="DATABASE",
                        help="PostgreSQL: only the at-depth figures, on a copy of DATABASE "
                             "that a --keep run left")  # fmt: skip
    args = parser.parse_args()
    if args.start_cluster:
        start_cluster(args.start_cluster, args.port)
        return
    if args.stop_cluster:
        stop_cluster(args.stop_cluster)
        return
    if args.save_history:
        save_history(args)
        return
    if args.requests + 2 * POLL_CALLS > args.catalog:
        parser.error("--catalog must hold --requests and the poll calls' files")
    root = Path(tempfile.mkdtemp(prefix="tssd-fd-"))
    try:
        print(json.dumps((views_of if args.views_of else run)(args, root), indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()

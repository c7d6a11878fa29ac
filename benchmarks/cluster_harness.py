"""Several real ``tssd serve`` instances on one PostgreSQL database and a shared library.

Shared by benchmarks/cluster_throughput.py and tests/acceptance/test_cluster_failover.py.
Every instance has its own home (socket, logs) and its own drive names; the simulated
library's catalog is in the shared database and its object store in one shared directory.
The campaign is a catalog import (objects without bytes: the library serves deterministic
filler, which :func:`expected_adler32` recomputes) and one recall per file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from tssd.testing import BIN, ServeProcess, adler32_file, serve_env, spawn_serve, wait_ready
from tssd.wire import Client

CHUNK_SIZE = 1 << 20  # tssd.files.CHUNK_SIZE: the filler block


def pnfsid(i: int) -> str:
    return f"00C1{i:032X}"


def volume(t: int) -> str:
    return f"CL{t:04d}"


def catalog_csv(tapes: int, files_per_tape: int, size: int) -> str:
    lines = ["pnfsid,volume,seq,size,storage_class,written_at"]
    for t in range(tapes):
        for s in range(files_per_tape):
            i = t * files_per_tape + s
            lines.append(f"{pnfsid(i)},{volume(t)},{s + 1},{size},atlas:tape,2024-01-01T00:00:00")
    return "\n".join(lines) + "\n"


def expected_adler32(pnfsid_: str, size: int) -> str:
    """The adler32 of the simulated library's filler for an imported object."""
    pattern = hashlib.sha256(pnfsid_.encode()).digest()
    block = pattern * (CHUNK_SIZE // len(pattern))
    value, remaining = 1, size
    while remaining > 0:
        n = min(remaining, CHUNK_SIZE)
        value = zlib.adler32(block[:n], value)
        remaining -= n
    return f"{value:08x}"


@dataclass
class Instance(ServeProcess):
    """One ``tssd serve`` process of the cluster."""

    name: str
    home: Path
    db_url: str
    library: Path
    drives: int
    time_scale: float
    heartbeat_s: float = 0.3
    lease_s: float = 3.0
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        settings = dict(
            TSSD_SIM_DATA_DIR=str(self.library),
            TSSD_SIM_DRIVES=str(self.drives),
            TSSD_SIM_DRIVE_PREFIX=f"{self.name}-d",
            TSSD_SIM_TIME_SCALE=str(self.time_scale),
            TSSD_SCHEDULER_TICK_S="0.2",
            TSSD_SCHEDULER_KEEP_MOUNTED_S="5",
            # Every tape is worth a mount at once: the campaign measures sharing, not waiting.
            TSSD_SCHEDULER_FILL_WAIT_S="0",
            TSSD_SCHEDULER_SHUTDOWN_GRACE_S="10",
            TSSD_CLUSTER_INSTANCE=self.name,
            TSSD_CLUSTER_HEARTBEAT_S=str(self.heartbeat_s),
            TSSD_CLUSTER_LEASE_S=str(self.lease_s),
        )
        return serve_env(self.home, self.db_url, settings | self.extra_env)

    def start(self, timeout: float = 60.0) -> None:
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self) -> None:
        self.proc = spawn_serve(self.env, self.home / "tssd.log", append=True)

    def wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        wait_ready(self.proc, self.home / "tssd.sock", timeout, self.log, name=self.name)

    def client(self) -> Client:
        return Client(str(self.home / "tssd.sock"))

    def log(self) -> str:
        path = self.home / "tssd.log"
        return path.read_text(errors="replace")[-20000:] if path.exists() else ""

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "tssctl"), *args], env=self.env, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip


def start_cluster(
    workdir: Path, db_url: str, drives: Sequence[int], time_scale: float, **kw: Any
) -> list[Instance]:
    """Start one instance per entry of *drives* (its drive count), one after the other."""
    library = workdir / "library"
    instances = [
        Instance(f"i{n + 1}", workdir / f"i{n + 1}", db_url, library, d, time_scale, **kw)
        for n, d in enumerate(drives)
    ]
    # The first creates the schema and the library's cartridges; the others then start
    # together.
    instances[0].start()
    for inst in instances[1:]:
        inst.spawn()
    for inst in instances[1:]:
        inst.wait_ready(60.0)
    return instances


def import_catalog(inst: Instance, workdir: Path, tapes: int, per_tape: int, size: int) -> None:
    path = workdir / "catalog.csv"
    path.write_text(catalog_csv(tapes, per_tape, size))
    res = inst.ctl("catalog", "import", str(path))
    if res.returncode != 0:
        raise AssertionError(f"catalog import failed: {res.stderr}")


def submit_recalls(instances: Sequence[Instance], out: Path, files: int, batch: int = 50) -> None:
    """Submit one recall per file, batches round-robin over *instances*."""
    out.mkdir(parents=True, exist_ok=True)
    bodies = [
        {"kind": "recall", "pnfsid": pnfsid(i), "path": str(out / pnfsid(i))} for i in range(files)
    ]
    for n, start in enumerate(range(0, files, batch)):
        target = instances[n % len(instances)]
        target.client().call(
            "POST", "/v1/requests/bulk", {"requests": bodies[start : start + batch]}
        )


def pg_dsn(db_url: str) -> str:
    return db_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def query(db_url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(pg_dsn(db_url))
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")


def finished(db_url: str) -> int:
    rows = query(db_url, "SELECT count(*) FROM requests WHERE state NOT IN ('queued', 'active')")
    return int(rows[0][0])


def overlapping_mounts(db_url: str) -> list[tuple[str, str, str]]:
    """(volume, drive, drive) for every two mounts of one volume whose intervals overlap.

    A mount lasts from its request (the claim came before it) until its dismount, or for
    ever if it is still open.
    """
    rows = query(
        db_url, "SELECT volume, drive, requested_at, dismounted_at FROM mounts "
        "ORDER BY volume, requested_at",
    )  # fmt: skip
    found = []
    # The latest-ending earlier mount of the volume: any later start before its end overlaps.
    last: dict[str, Any] = {}
    for row in rows:
        prev = last.get(row["volume"])
        if prev is not None and (
            prev["dismounted_at"] is None or prev["dismounted_at"] > row["requested_at"]
        ):
            found.append((row["volume"], prev["drive"], row["drive"]))
        if prev is None or _ends_later(row, prev):
            last[row["volume"]] = row
    return found


def _ends_later(a: Any, b: Any) -> bool:
    if a["dismounted_at"] is None:
        return True
    return b["dismounted_at"] is not None and a["dismounted_at"] > b["dismounted_at"]


def check_campaign(db_url: str, out: Path, files: int, size: int) -> dict[str, Any]:
    """The invariants of a finished campaign, as figures."""
    states = query(db_url, "SELECT state, count(*) FROM requests GROUP BY state")
    done_events = query(
        db_url, "SELECT request_id, count(*) AS n FROM request_events "
        "WHERE to_state = 'done' GROUP BY request_id",
    )  # fmt: skip
    bad_files = [
        pnfsid(i)
        for i in range(files)
        if not (out / pnfsid(i)).is_file()
        or (out / pnfsid(i)).stat().st_size != size
        or adler32_file(out / pnfsid(i)) != expected_adler32(pnfsid(i), size)
    ]
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
    return {
        "states": {r["state"]: r["count"] for r in states},
        "done_once": sum(1 for r in done_events if r["n"] == 1),
        "done_twice": sum(1 for r in done_events if r["n"] > 1),
        "overlapping_mounts": overlapping_mounts(db_url),
        "bad_files": len(bad_files),
        "temporary_files": len(leftovers),
        "mounts": int(query(db_url, "SELECT count(*) FROM mounts")[0][0]),
    }


def takeover(db_url: str, victim: str) -> dict[str, Any]:
    """When the survivors requeued *victim*'s requests, measured from its last heartbeat."""
    rows = query(
        db_url,
        "SELECT min(e.at) AS first, count(*) AS n FROM request_events e WHERE e.reason = $1",
        f"instance {victim} lost its lease",
    )
    beat = query(db_url, "SELECT state, heartbeat_at FROM instances WHERE id = $1", victim)
    first = rows[0]["first"]
    return {
        "state": beat[0]["state"],
        "requeued": int(rows[0]["n"]),
        "after_last_heartbeat_s": (first - beat[0]["heartbeat_at"]).total_seconds()
        if first is not None
        else None,
        "served_by": sorted(
            {
                r["instance"]
                for r in query(
                    db_url,
                    "SELECT DISTINCT r.instance FROM requests r JOIN request_events e "
                    "ON e.request_id = r.id WHERE e.reason = $1",
                    f"instance {victim} lost its lease",
                )
            }
        ),
    }


def status(inst: Instance) -> dict[str, Any]:
    res = inst.ctl("status", "--json")
    if res.returncode != 0:
        raise AssertionError(res.stderr)
    data: dict[str, Any] = json.loads(res.stdout)
    return data

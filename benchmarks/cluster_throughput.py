"""Campaign throughput of several tssd instances on one PostgreSQL (issue 9).

Usage: python benchmarks/cluster_throughput.py [--tapes 12] [--per-tape 40] [--size 65536]
           [--time-scale 0.01] [--configs 6,3+3,2+2+2,2,2+2] [--pg URL] [--workdir DIR]

Each configuration is a list of instances with their drive counts ("3+3" = two instances
with three drives each), run on a fresh database with the same campaign: a catalog of
``tapes`` cartridges of ``per-tape`` files, one recall per file, submitted round-robin to
the instances in batches of 50. Reported per configuration: wall time from the first
submit to the last finished request, files/s, mounts, and how many mount attempts lost
the cartridge to another instance (``cluster.volume_taken``). The invariants of the
acceptance test are checked too (every request done once, no overlapping mounts), and the
size of the requests and request_events tables per request is printed (sizing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from cluster_harness import (
    check_campaign,
    finished,
    import_catalog,
    query,
    start_cluster,
    submit_recalls,
    wait_until,
)

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


async def _admin(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def run_config(drives: list[int], args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    name = f"tssd_bench_{secrets.token_hex(4)}"
    asyncio.run(_admin(args.pg, f'CREATE DATABASE "{name}"'))
    base = args.pg.split("://", 1)[1].rsplit("/", 1)[0]
    db_url = f"postgresql+asyncpg://{base}/{name}"
    files = args.tapes * args.per_tape
    instances = start_cluster(
        workdir, db_url, drives, args.time_scale, heartbeat_s=1.0, lease_s=5.0
    )
    try:
        import_catalog(instances[0], workdir, args.tapes, args.per_tape, args.size)
        out = workdir / "out"
        started = time.monotonic()
        submit_recalls(instances, out, files)
        wait_until(lambda: finished(db_url) == files, 1800, "campaign finished")
        wall = time.monotonic() - started
        figures = check_campaign(db_url, out, files, args.size)
        sizes = (
            "SELECT pg_total_relation_size('requests') + pg_total_relation_size('request_events')"
        )
        request_bytes = int(query(db_url, sizes)[0][0])
    finally:
        for inst in instances:
            if inst.alive():
                inst.stop(signal.SIGTERM)
        asyncio.run(_admin(args.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    logs = [(inst.home / "tssd.log").read_text(errors="replace") for inst in instances]
    taken = sum(text.count('"cluster.volume_taken"') for text in logs)
    return {
        "config": "+".join(map(str, drives)),
        "instances": len(drives),
        "drives": sum(drives),
        "files": files,
        "wall_s": round(wall, 2),
        "files_per_s": round(files / wall, 1),
        "mounts": figures["mounts"],
        "volume_taken": taken,
        "db_bytes_per_request": request_bytes // files,
        "ok": figures["done_once"] == files
        and not figures["overlapping_mounts"]
        and figures["bad_files"] == 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tapes", type=int, default=12)
    parser.add_argument("--per-tape", type=int, default=40)
    parser.add_argument("--size", type=int, default=64 * 1024)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--configs", default="6,3+3,2+2+2,2,2+2")
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="tssd-cluster-"))
    results = []
    for n, config in enumerate(args.configs.split(",")):
        drives = [int(d) for d in config.split("+")]
        result = run_config(drives, args, root / f"run{n}")
        print(json.dumps(result), flush=True)
        results.append(result)
    print(json.dumps({"results": results}, indent=2))


if __name__ == "__main__":
    main()

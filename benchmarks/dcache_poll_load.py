"""tssd answering tss-hsm polls while a recall campaign runs: rate and latency.

An open-loop load generator sends, at ``--rate`` per second, exactly the request a
``tss-hsm -mode=poll`` call makes for an open recall (``GET /v1/requests/latest``, one
connection per request, over the Unix socket), for ``--seconds``, while tssd recalls
``--files`` files. Latency is measured from the moment a request was due, so a stalled
daemon cannot hide behind a slowed-down generator (no coordinated omission).

    python benchmarks/dcache_poll_load.py --rate 1000 --seconds 30 --files 3000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from dcache_common import Tssd, bulk_recall, dump, migrate, percentile, progress, write_files


async def connect(socket: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    # A full listen backlog makes a non-blocking connect fail at once; tss-hsm's blocking
    # connect waits instead, and so does this, the wait counting as latency.
    while True:
        try:
            return await asyncio.open_unix_connection(socket)
        except BlockingIOError:
            await asyncio.sleep(0.001)


async def one_poll(socket: str, path: str) -> int:
    reader, writer = await connect(socket)
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n"
            "Connection: close\r\nUser-Agent: tss-hsm\r\nContent-Length: 0\r\n\r\n".encode()
        )
        raw = await reader.read()
    finally:
        writer.close()
    return int(raw.split(b" ", 2)[1])


async def load(socket: str, pnfsids: list[str], rate: float, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    rng = random.Random(3)

    async def fire(due: float, pnfsid: str) -> None:
        try:
            status = await one_poll(socket, f"/v1/requests/latest?kind=recall&pnfsid={pnfsid}")
        except OSError as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            return
        latencies.append(loop.time() - due)
        statuses[status] = statuses.get(status, 0) + 1

    tasks = []
    start = loop.time()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(fire(due, rng.choice(pnfsids))))
    await asyncio.gather(*tasks)
    elapsed = loop.time() - start
    return {
        "sent": total,
        "answered": len(latencies),
        "errors": errors,
        "statuses": statuses,
        "achieved_per_s": round(len(latencies) / elapsed, 1),
        "latency_ms": {
            q: round(1000 * percentile(latencies, p), 1)
            for q, p in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--scale", type=float, default=0.0005, help="sim.time_scale")
    parser.add_argument("--database", default="", help="database.url (default: SQLite)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tssd-pollload-"))
    env = {"TSSD_SIM_DRIVES": "2", "TSSD_SIM_TIME_SCALE": str(args.scale)}
    if args.database:
        env["TSSD_DATABASE_URL"] = args.database
    tssd = Tssd(work / "home", env)
    try:
        tssd.start()
        files = migrate(tssd, write_files(work / "src", 1, args.files, ["atlas", "cms"], 1))
        ids = bulk_recall(tssd, files, work / "dst", "atlas")
        progress(f"campaign of {len(ids)} recalls started; polling at {args.rate}/s")
        before = tssd.client().call("POST", "/v1/requests/query", {"ids": ids})["counts"]
        result = asyncio.run(load(str(tssd.socket), [f.pnfsid for f in files], args.rate,
                                  args.seconds))  # fmt: skip
        after = tssd.client().call("POST", "/v1/requests/query", {"ids": ids})["counts"]
    finally:
        tssd.stop()
        shutil.rmtree(work, ignore_errors=True)
    result.update(
        rate_target=args.rate,
        seconds=args.seconds,
        campaign_files=args.files,
        campaign_done_before=before["done"],
        campaign_done_after=after["done"],
        database=args.database or "sqlite",
        at=time.strftime("%Y-%m-%d %H:%M"),
    )
    dump(result)


if __name__ == "__main__":
    main()

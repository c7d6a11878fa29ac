"""tssd answering tss-hsm polls while a recall campaign runs: rate, latency, CPU per poll.

``--procs`` load-generator processes (never tssd's) send, together ``--rate`` per second
for ``--seconds``, exactly the bytes a ``tss-hsm -mode=poll get`` sends for a stage of the
campaign (``POST /v1/requests/obtain``, built by the shim's own code from dCache's
argument list; one Unix-socket connection each). An answer showing the recall finished is
followed, as the shim does, by ``POST .../reported``, and that stage is not polled again.
Latency counts from the moment a request was due, so a stalled daemon cannot hide behind
a slowed-down generator (no coordinated omission).

tssd's CPU time is read from ``/proc/<pid>/stat`` during a quiet window (campaign only)
and during the load: the difference per answered poll is the cost of a poll.

    python benchmarks/dcache_poll_load.py --rate 1000 --seconds 30 --files 5000 --procs 2
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from dcache_common import File, Tssd, bulk_recall, dump, migrate, percentile, progress, write_files

from tssd.shim import actions
from tssd.shim.args import parse_args
from tssd.shim.fastclient import Client, decode

FINISHED = (b'"state":"done"', b'"state":"failed"', b'"state":"cancelled"')
FINISHED_SPACED = (b'"state": "done"', b'"state": "failed"', b'"state": "cancelled"')


def poll_bytes(socket: str, f: File, dest: Path) -> bytes:
    """What ``tss-hsm-fast get ... -mode=poll`` sends for this stage, byte for byte."""
    argv = ["get", f.pnfsid, str(dest / f.pnfsid), f"-si={f.storage_info()}", f"-uri={f.uri}",
            f"-tssd={socket}", "-queue=atlas", "-hsmInstance=osm", "-mode=poll"]  # fmt: skip
    call = parse_args(argv)
    assert call.transfer is not None
    body = {**actions.get_body(call, call.transfer, str(dest / f.pnfsid)), "adopt": "finished"}
    client = Client(socket)
    return client._request("POST", "/v1/requests/obtain", "localhost", body)


async def exchange(socket: str, data: bytes) -> bytes:
    while True:
        try:
            reader, writer = await asyncio.open_unix_connection(socket)
            break
        except BlockingIOError:  # full backlog: tss-hsm waits too, and so does the latency
            await asyncio.sleep(0.001)
    try:
        writer.write(data)
        return await reader.read()
    finally:
        writer.close()


async def generate(
    socket: str, stages: list[tuple[bytes, bytes]], rate: float, seconds: float, start: float
) -> dict[str, Any]:
    """One process's share: *stages* are (poll bytes, pnfsid) pairs."""
    latencies: list[float] = []
    collect_latencies: list[float] = []  # the calls that found the recall finished
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    # dCache runs one script at a time per stage, and none after its outcome was reported.
    collected: set[int] = set()
    running: set[int] = set()
    rng = random.Random(os.getpid())
    cpu0 = os.times()

    def pick() -> int | None:
        for _ in range(100):
            index = rng.randrange(len(stages))
            if index not in collected and index not in running:
                running.add(index)
                return index
        return None

    async def fire(due: float, index: int) -> None:
        try:
            await poll(due, index)
        except OSError as exc:  # reporting the outcome failed: dCache would call again
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        finally:
            running.discard(index)

    async def poll(due: float, index: int) -> None:
        try:
            raw = await exchange(socket, stages[index][0])
        except OSError as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            return
        latency = time.time() - due
        latencies.append(latency)
        status = int(raw.split(b" ", 2)[1])
        statuses[status] = statuses.get(status, 0) + 1
        if any(m in raw for m in FINISHED + FINISHED_SPACED):
            collect_latencies.append(latency)
            body = decode(raw.partition(b"\r\n\r\n")[2].decode())
            request_id = body["request"]["id"]
            await exchange(socket, Client(socket)._request(
                "POST", f"/v1/requests/{request_id}/reported", "localhost", {}))  # fmt: skip
            collected.add(index)

    await asyncio.sleep(max(0.0, start - time.time()))
    tasks = []
    for i in range(int(rate * seconds)):
        due = start + i / rate
        delay = due - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        index = pick()
        if index is not None:
            tasks.append(asyncio.create_task(fire(due, index)))
    await asyncio.gather(*tasks)
    cpu1 = os.times()
    return {
        "cpu_s": cpu1.user + cpu1.system - cpu0.user - cpu0.system,
        "latencies": latencies,
        "collect_latencies": collect_latencies,
        "statuses": statuses,
        "errors": errors,
        "reported": len(collected),
        "elapsed": time.time() - start,
    }


def worker(args: tuple[str, list[tuple[bytes, bytes]], float, float, float]) -> dict[str, Any]:
    return asyncio.run(generate(*args))


def quantiles_ms(latencies: list[float]) -> dict[str, float]:
    return {
        q: round(1000 * percentile(latencies, p), 1)
        for q, p in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))
    }


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(tssd: Tssd, files: list[File], dest: Path, args: argparse.Namespace) -> dict[str, Any]:
    socket = str(tssd.socket)
    stages = [(poll_bytes(socket, f, dest), f.pnfsid.encode()) for f in files]
    shares = [stages[i :: args.procs] for i in range(args.procs)]
    assert tssd.proc is not None
    pid = tssd.proc.pid
    quiet0 = cpu_s(pid)
    time.sleep(args.quiet)
    quiet_rate = (cpu_s(pid) - quiet0) / args.quiet
    start = time.time() + 1.0
    jobs = [(socket, share, args.rate / args.procs, args.seconds, start + k / args.rate)
            for k, share in enumerate(shares)]  # fmt: skip
    with multiprocessing.get_context("fork").Pool(args.procs) as pool:
        cpu0 = cpu_s(pid)
        results = pool.map(worker, jobs)
        cpu1 = cpu_s(pid)
    latencies = [x for r in results for x in r["latencies"]]
    elapsed = max(r["elapsed"] for r in results)
    answered = len(latencies)
    busy = cpu1 - cpu0
    statuses: dict[int, int] = {}
    errors: dict[str, int] = {}
    for r in results:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    generator_cpu = sum(r["cpu_s"] for r in results)
    return {
        "due": int(args.rate * args.seconds) // args.procs * args.procs,
        "answered": answered,
        "errors": errors,
        "statuses": statuses,
        "reported_after_finish": sum(r["reported"] for r in results),
        "achieved_per_s": round(answered / elapsed, 1),
        "latency_ms": quantiles_ms(latencies),
        "latency_ms_collect": quantiles_ms([x for r in results for x in r["collect_latencies"]]),
        "tssd_cpu_quiet_per_s": round(quiet_rate, 3),
        "tssd_cpu_under_load_per_s": round(busy / elapsed, 3),
        "tssd_cpu_ms_per_poll": round(1000 * (busy - quiet_rate * elapsed) / answered, 3)
        if answered
        else None,
        "generator_cpu_per_s": round(generator_cpu / elapsed, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes")
    parser.add_argument("--quiet", type=float, default=5, help="seconds of campaign-only CPU")
    parser.add_argument("--scale", type=float, default=0.001, help="sim.time_scale")
    parser.add_argument("--database", default="", help="database.url (default: SQLite)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tssd-pollload-"))
    env = {"TSSD_SIM_DRIVES": "2", "TSSD_SIM_TIME_SCALE": "0.0005"}
    if args.database:
        env["TSSD_DATABASE_URL"] = args.database
    tssd = Tssd(work / "home", env)
    dest = work / "dst"
    try:
        tssd.start()
        files = migrate(tssd, write_files(work / "src", 1, args.files, ["atlas", "cms"], 1))
        tssd.stop()
        tssd.env_extra["TSSD_SIM_TIME_SCALE"] = str(args.scale)
        tssd.start()
        ids = bulk_recall(tssd, files, dest, "atlas")
        progress(f"campaign of {len(ids)} recalls started; polling at {args.rate}/s")
        before = tssd.client().call("POST", "/v1/requests/query", {"ids": ids})["counts"]
        result = load(tssd, files, dest, args)
        after = tssd.client().call("POST", "/v1/requests/query", {"ids": ids})["counts"]
    finally:
        tssd.stop()
        shutil.rmtree(work, ignore_errors=True)
    result.update(
        rate_target=args.rate,
        seconds=args.seconds,
        procs=args.procs,
        campaign_files=args.files,
        campaign_done_before=before["done"],
        campaign_done_after=after["done"],
        time_scale=args.scale,
        database=args.database or "sqlite",
        at=time.strftime("%Y-%m-%d %H:%M"),
    )
    dump(result)


if __name__ == "__main__":
    main()

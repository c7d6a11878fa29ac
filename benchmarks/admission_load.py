"""100k submits through the API with admission control on: event-loop stall, RSS, outcomes.

Starts a real ``tssd serve`` (SQLite in a temporary home, or ``--db URL``), imports a
catalog holding every file and pauses the queue, so that every admitted recall stays open
and counts against ``limits.max_open_requests``. ``--clients`` threads then send
``--total`` recalls over the Unix socket, as bulk submits of ``--bulk`` requests (dCache's
bulk API, ENDIT) or, with ``--bulk 1``, one request per call (``tss-hsm``). Every call
must end as accepted (200/201) or told to retry (503 with Retry-After); anything else
counts as an error.

Measured: the daemon's own event-loop lag (its admission monitor samples every 100 ms and
logs ``loop.stall`` above 100 ms; ``admission.summary`` at exit has the maximum), the
latency of ``GET /healthz`` sent every 20 ms by a probe thread during the load (what a
poll waits when the loop stalls), and the daemon's peak RSS (VmHWM).

    nice -n 10 python benchmarks/admission_load.py --total 100000 --limit 60000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tssd.testing import serve_env, spawn_serve, stop_serve, wait_ready
from tssd.wire import ApiError, Client

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"


def pnfsid(i: int) -> str:
    return f"00AD{i:020X}"


def catalog(total: int) -> str:
    rows = (f"{pnfsid(i)},V{i // 5000:05d},{i % 5000 + 1},1000000,atlas:tape,"
            f"2020-01-01T00:00:00+00:00\n" for i in range(total))  # fmt: skip
    return HEADER + "".join(rows)


def rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class Probe(threading.Thread):
    """GET /healthz every 20 ms; the slowest answer is the longest stall a poll saw."""

    def __init__(self, socket: Path) -> None:
        super().__init__(daemon=True)
        self.client = Client(str(socket))
        self.stop = threading.Event()
        self.latencies: list[float] = []

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            self.client.call("GET", "/healthz", timeout=60)
            self.latencies.append(time.monotonic() - start)
            time.sleep(0.02)


def submit_share(socket: Path, pool: Path, ids: range, bulk: int, out: dict[str, Any]) -> None:
    client = Client(str(socket), timeout=300)
    for start in range(ids.start, ids.stop, bulk):
        chunk = [{"kind": "recall", "pnfsid": pnfsid(i), "path": f"{pool}/{i % 1000}/{i}"}
                 for i in range(start, min(start + bulk, ids.stop))]  # fmt: skip
        began = time.monotonic()
        try:
            if bulk == 1:
                client.call("POST", "/v1/requests", chunk[0])
            else:
                client.call("POST", "/v1/requests/bulk", {"requests": chunk})
            out["accepted"] += len(chunk)
        except ApiError as exc:
            if exc.status == 503:
                out["retry"] += len(chunk)
            else:
                out["errors"].append(f"{exc.status} {exc.message[:100]}")
        out["latency"].append(time.monotonic() - began)


def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    pool = home / "pool"
    for d in range(1000):
        (pool / str(d)).mkdir(parents=True, exist_ok=True)
    settings = {
        "TSSD_API_POOL_ROOTS": str(pool),
        "TSSD_LIMITS_MAX_OPEN_REQUESTS": str(args.limit),
        "TSSD_LOG_LEVEL": "info",
        "TSSD_SIM_TIME_SCALE": "0.0005",
    }
    db_url = args.db or f"sqlite+aiosqlite:///{home / 'tssd.db'}"
    log_path = home / "tssd.log"
    proc = spawn_serve(serve_env(home / "state", db_url, settings), log_path)
    socket = home / "state" / "tssd.sock"
    wait_ready(proc, socket, 120, lambda: log_path.read_text()[-3000:])
    client = Client(str(socket), timeout=600)
    client.call("POST", "/v1/catalog/import", {"csv": catalog(args.total)})
    client.call("PATCH", "/v1/queues/default", {"paused": True})
    rss_before = rss_kb(proc.pid, "VmRSS")
    probe = Probe(socket)
    probe.start()
    shares = [range(i * args.total // args.clients, (i + 1) * args.total // args.clients)
              for i in range(args.clients)]  # fmt: skip
    outs: list[dict[str, Any]] = [
        {"accepted": 0, "retry": 0, "errors": [], "latency": []} for _ in shares
    ]
    threads = [threading.Thread(target=submit_share, args=(socket, pool, ids, args.bulk, out))
               for ids, out in zip(shares, outs, strict=True)]  # fmt: skip
    began, began_utc = time.monotonic(), datetime.now(UTC).isoformat()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    time.sleep(1.0)  # the probe's last samples
    probe.stop.set()
    probe.join()
    status = client.call("GET", "/v1/status")
    peak_rss = rss_kb(proc.pid, "VmHWM")
    stop_serve(proc, signal.SIGTERM, 120)
    events = [json.loads(line) for line in log_path.read_text().splitlines()
              if line.startswith("{")]  # fmt: skip
    # Stalls while the load ran (the catalog import before it is not measured here).
    stalls = [e for e in events if e.get("event") == "loop.stall"
              and e["timestamp"].replace("Z", "+00:00") >= began_utc]  # fmt: skip
    latencies = sorted(x for out in outs for x in out["latency"])
    return {
        "total": args.total,
        "bulk": args.bulk,
        "clients": args.clients,
        "limit": args.limit,
        "accepted": sum(o["accepted"] for o in outs),
        "told_to_retry": sum(o["retry"] for o in outs),
        "errors": [e for o in outs for e in o["errors"]][:5],
        "open_in_db": sum(
            c.get("queued", 0) + c.get("active", 0) for c in status["counts"].values()
        ),
        "seconds": round(elapsed, 1),
        "submits_per_s": round(args.total / elapsed),
        "call_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
        "call_max_ms": round(1000 * latencies[-1], 1),
        "max_loop_lag_ms": round(1000 * max((e["lag_s"] for e in stalls), default=0.0), 1),
        "max_loop_cpu_in_stall_ms": round(1000 * max((e["cpu_s"] for e in stalls), default=0.0), 1),
        "loop_stalls_over_100ms": len(stalls),
        "load_average": os.getloadavg()[0],
        "healthz_max_ms": round(1000 * max(probe.latencies), 1),
        "healthz_samples": len(probe.latencies),
        "rss_mb_before": round(rss_before / 1024),
        "rss_mb_peak": round(peak_rss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--bulk", type=int, default=1000, help="requests per call (1 = single)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--limit", type=int, default=60_000, help="limits.max_open_requests")
    parser.add_argument("--db", default="", help="database URL (default: SQLite in a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home (logs)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tssd-admission-"))
    try:
        result = run(args, home)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    result["home"] = str(home) if args.keep else None
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

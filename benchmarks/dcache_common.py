"""Shared by the dCache benchmarks: a real ``tssd serve``, files on its simulated tapes.

Not a test fixture: benchmarks print figures, tests assert behaviour.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tssd.wire import Client, WireError

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class File:
    pnfsid: str
    path: Path
    size: int
    adler32: str
    store: str
    group: str = "tape"
    uri: str = ""

    def storage_info(self) -> str:
        """As dCache builds it for a stage: flag-c, uid/gid, store/group, path=, locations."""
        return (
            f"size={self.size};new=false;stored=true;sClass={self.store}:{self.group};cClass=-;"
            "hsm=osm;accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;"
            f"path=/pnfs/example.org/data/{self.store}/{self.pnfsid};uid=1000;gid=1000;"
            f"flag-c=1:{self.adler32};store={self.store};group={self.group};{self.uri};"
        )


@dataclass
class Tssd:
    """One ``tssd serve`` on an embedded SQLite database in *home*."""

    home: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def socket(self) -> Path:
        return self.home / "tssd.sock"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}
        env.update(
            TSSD_HOME=str(self.home),
            TSSD_API_METRICS_TCP="",
            TSSD_LOG_FORMAT="json",
            TSSD_LOG_LEVEL="warning",
            TSSD_SCHEDULER_TICK_S="0.2",
            # The benchmark's files lie beside the daemon's home (tssd is confined by default).
            TSSD_API_POOL_ROOTS=str(self.home.parent),
            # The benchmark's stores, whatever they are, may claim cartridges.
            TSSD_STORAGE_CLASSES='[{name = "*", max_tapes = 1000000}]',
        )
        env.update(self.env_extra)
        return env

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with (self.home / f"tssd-{self.starts}.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "tssd"), "serve"], env=self.env(), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"tssd exited {self.proc.returncode}; see {self.home}")
            try:
                self.client().call("GET", "/healthz", timeout=2)
                return
            except WireError:
                time.sleep(0.1)
        raise SystemExit("tssd did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def client(self) -> Client:
        return Client(str(self.socket), timeout=120)

    def queue_pending(self, queue: str) -> int:
        status = self.client().call("GET", "/v1/status")
        for entry in status.get("queues", []):
            if entry.get("name") == queue:
                return int(entry.get("queued", 0)) + int(entry.get("active", 0))
        return 0


def progress(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def adler32(data: bytes) -> str:
    return f"{zlib.adler32(data):08x}"


def write_files(
    directory: Path, first: int, count: int, stores: list[str], seed: int, max_size: int = 16384
) -> list[File]:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(first, first + count):
        pnfsid = f"0000{i:032X}"
        data = rng.randbytes(rng.randint(1, max_size))
        path = directory / pnfsid
        path.write_bytes(data)
        files.append(File(pnfsid, path, len(data), adler32(data), stores[i % len(stores)]))
    return files


def wait_all(client: Client, ids: list[int], what: str, timeout: float = 3600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = client.call("POST", "/v1/requests/query", {"ids": ids})["counts"]
        if counts["failed"] or counts["cancelled"]:
            raise SystemExit(f"{what}: {counts}")
        if counts["done"] == len(ids):
            return
        progress(f"{what}: {counts['done']}/{len(ids)} done")
        time.sleep(2)
    raise SystemExit(f"{what}: not done in {timeout} s")


def migrate(tssd: Tssd, files: list[File]) -> list[File]:
    """Put *files* on tape through the bulk API; return them with their URIs."""
    client = tssd.client()
    body = {
        "requests": [
            {"kind": "migrate", "pnfsid": f.pnfsid, "path": str(f.path), "size": f.size,
             "storage_class": f"{f.store}:{f.group}", "checksum": f.adler32,
             "store": f.store, "group": f.group}
            for f in files
        ]
    }  # fmt: skip
    results = client.call("POST", "/v1/requests/bulk", body)["results"]
    ids = [r["request"]["id"] for r in results]
    wait_all(client, ids, "migration")
    uris: dict[str, str] = {}
    after = 0
    while True:
        page = client.call("GET", f"/v1/requests?kind=migrate&state=done&limit=1000&after={after}")
        uris.update({r["pnfsid"]: r["uri"] for r in page["requests"]})
        if page["next"] is None:
            break
        after = page["next"]
    return [File(f.pnfsid, f.path, f.size, f.adler32, f.store, f.group, uris[f.pnfsid])
            for f in files]  # fmt: skip


def bulk_recall(tssd: Tssd, files: Iterable[File], directory: Path, queue: str) -> list[int]:
    directory.mkdir(parents=True, exist_ok=True)
    body = {
        "requests": [
            {"kind": "recall", "pnfsid": f.pnfsid, "path": str(directory / f.pnfsid),
             "uris": [f.uri], "queue": queue}
            for f in files
        ]
    }  # fmt: skip
    results = tssd.client().call("POST", "/v1/requests/bulk", body)["results"]
    return [r["request"]["id"] for r in results]


def identical(files: Iterable[File], directory: Path) -> tuple[int, int]:
    """(byte-identical recalled files with a matching .crcval, files checked)."""
    good = total = 0
    for f in files:
        total += 1
        dest = directory / f.pnfsid
        crc = dest.with_name(f.pnfsid + ".crcval")
        try:
            same = dest.read_bytes() == f.path.read_bytes()
            crc_ok = crc.read_text().split()[0] == f.adler32
        except OSError:
            continue
        good += same and crc_ok
    return good, total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def dump(report: dict[str, Any]) -> None:
    import json

    print(json.dumps(report, indent=2))

"""Backend faults with the real daemon: 5 % transient errors on every simulated library
operation, then a permanent one. Every request succeeds, every fault is retried and
counted, and a permanent error fails exactly its own request with exit code 31."""

from __future__ import annotations

import os
import signal
import socket
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FILES = 30


def metrics(daemon: Daemon) -> dict[str, float]:
    """The daemon's /metrics over its Unix socket, as {sample with labels: value}."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(daemon.socket))
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: tssd\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    body = data.split(b"\r\n\r\n", 1)[1].decode()
    values = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_transient_faults_are_retried_and_a_permanent_one_fails_alone(
    tmp_path: Path, sqlite_url: str
) -> None:
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    daemon.extra_env.update(
        TSSD_SIM_TRANSIENT_ERROR_RATE="0.05",
        TSSD_SIM_SEED="5",
        TSSD_BACKEND_RETRY_BASE_S="0.01",
        TSSD_BACKEND_RETRY_MAX_S="0.1",
    )
    daemon.start()
    try:
        run_campaign(daemon, tmp_path)
    finally:
        if daemon.alive():
            daemon.stop(signal.SIGKILL)


def run_campaign(daemon: Daemon, tmp_path: Path) -> None:
    pool, out = tmp_path / "pool", tmp_path / "out"
    pool.mkdir()
    out.mkdir()
    files = []
    for i in range(FILES):
        path = pool / f"f{i}"
        path.write_bytes(os.urandom(1000 + 997 * i))
        files.append((f"00FA{i:032X}", path, path.stat().st_size, adler32_file(path)))

    def put(f: tuple[str, Path, int, str]) -> str:
        res = daemon.hsm("put", f[0], str(f[1]), f"-si={storage_info(f[2], f[3])}")
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()

    def get(f: tuple[str, Path, int, str], uri: str) -> int:
        res = daemon.hsm("get", f[0], str(out / f[0]), f"-si={storage_info(f[2], f[3])}",
                         f"-uri={uri}")  # fmt: skip
        return res.returncode

    with ThreadPoolExecutor(8) as ex:
        uris = list(ex.map(put, files))
        codes = list(ex.map(get, files, uris))
    assert codes == [0] * FILES
    for pid, path, _size, adler in files:
        assert (out / pid).read_bytes() == path.read_bytes()
        assert adler32_file(out / pid) == adler

    # Every injected fault was met by a retry, and counted.
    events = daemon.events()
    injected = Counter(
        e["event"]
        for e in events
        if e.get("event") in ("sim.mount.failed", "sim.read.failed", "sim.write.failed")
        and e.get("error_type", "TransientBackendError") == "TransientBackendError"
    )
    assert sum(injected.values()) >= 3, injected  # the campaign met faults of its own
    m = metrics(daemon)
    retries = m["tssd_backend_retries_total"]
    transient = m['tssd_backend_errors_total{transient="true"}']
    gave_up = sum(1 for e in events if e.get("event") == "backend.gave_up")
    assert gave_up == 0
    assert transient == retries  # nothing transient was left unretried
    assert retries >= sum(injected.values())
    # Per-file faults went back to the queue after a backoff delay, once per fault.
    per_file = injected["sim.read.failed"] + injected["sim.write.failed"]
    requeued = sum(1 for e in events if e.get("event") == "backend.retry" and "_item" in e["op"])
    assert requeued == per_file
    assert m.get('tssd_hardware_failures_total{op="read"}', 0) == injected["sim.read.failed"]
    assert daemon.requests(state="failed") == []

    # A permanent error (the object's bytes are gone: a media error) fails that recall
    # with the contract's exit code 31, and no other.
    victim, survivor = files[0], files[1]
    bfid = uris[0].rsplit("bfid=", 1)[1]
    (daemon.home / "sim" / "objects" / bfid).unlink()
    (out / victim[0]).unlink()
    (out / survivor[0]).unlink()
    with ThreadPoolExecutor(2) as ex:
        codes = list(ex.map(get, [victim, survivor], [uris[0], uris[1]]))
    assert codes[1] == 0
    assert codes[0] == 31, codes
    assert not (out / victim[0]).exists()
    [failed] = daemon.requests(state="failed")
    assert failed["pnfsid"] == victim[0] and failed["error_code"] == 31
    assert daemon.alive()
    assert daemon.stop() == 0

"""Issue 21 point 3 against a real ``tssd serve``: ``tssctl drives|tapes|queues`` alone
list; a paused queue holds its migrations as well as its recalls; no ``*_created``
series on /metrics."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import pytest
from conftest import Daemon

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_groups_alone_list(daemon: Daemon) -> None:
    daemon.start()
    for noun in ("drives", "tapes", "queues"):
        alone, listed = daemon.ctl(noun), daemon.ctl(noun, "list")
        assert (alone.returncode, alone.stderr) == (0, ""), (noun, alone.stderr)
        assert alone.stdout == listed.stdout and alone.stdout.strip(), noun
        as_json = daemon.ctl(noun, "--json")
        assert json.loads(as_json.stdout) == json.loads(daemon.ctl(noun, "list", "--json").stdout)
    assert daemon.ctl("tapes", "--sort", "pending").returncode == 0
    assert daemon.stop(signal.SIGTERM) == 0


def test_a_paused_queue_holds_its_migrations(daemon: Daemon, tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    daemon.extra_env.update(TSSD_API_POOL_ROOTS=str(pool), TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="0.2")
    daemon.start()
    client = daemon.client()
    assert daemon.ctl("queues", "set", "atlas", "--pause").returncode == 0

    def migrate(pnfsid: str, queue: str) -> int:
        path = pool / pnfsid
        path.write_bytes(pnfsid.encode() * 1000)
        body = {"kind": "migrate", "pnfsid": pnfsid, "path": str(path), "size": 2000,
                "storage_class": "atlas:tape", "checksum": adler32_file(path),
                "queue": queue}  # fmt: skip
        request_id: int = client.call("POST", "/v1/requests", body)["request"]["id"]
        return request_id

    held, free = migrate("A1", "atlas"), migrate("D1", "default")
    done = client.call("GET", f"/v1/requests/{free}/wait?timeout=60", timeout=90)
    assert done["request"]["state"] == "done"
    # The same storage class was written while the paused queue's file waited.
    time.sleep(2)
    waiting = client.call("GET", f"/v1/requests/{held}")["request"]
    assert (waiting["state"], waiting["attempts"]) == ("queued", 0)
    assert daemon.ctl("queues", "set", "atlas", "--resume").returncode == 0
    resumed = client.call("GET", f"/v1/requests/{held}/wait?timeout=60", timeout=90)
    assert resumed["request"]["state"] == "done"
    assert daemon.stop(signal.SIGTERM) == 0


def test_metrics_have_no_created_series(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(daemon.socket))
        s.sendall(b"GET /metrics HTTP/1.0\r\nHost: tssd\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    body = data.split(b"\r\n\r\n", 1)[1].decode()
    assert "tssd_requests_total" in body or "tssd_requests" in body
    assert "_created" not in body
    assert daemon.stop(signal.SIGTERM) == 0

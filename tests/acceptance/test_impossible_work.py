"""Issue 17 point 5 against a real ``tssd serve``: a migration larger than any tape was
retried for ever (93 % CPU, a storm of events) and blocked its storage class. Now it fails
on its first attempt with exit 31, and the other files of its class are written."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CAPACITY = 100_000


def test_a_file_larger_than_any_tape_fails_at_once(daemon: Daemon, tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    daemon.extra_env.update(
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_SIM_TAPE_CAPACITY=str(CAPACITY),
        TSSD_SIM_TAPES="6",
        TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="0.5",
    )
    daemon.start()
    client = daemon.client()
    # Three that fit one by one but not together (the batch is cut down), one that never fits.
    sizes = {"A0": 40_000, "A1": 40_000, "A2": 40_000, "FF": CAPACITY + 1}
    ids = {}
    for pnfsid, size in sizes.items():
        path = pool / pnfsid
        path.write_bytes(bytes([len(ids) + 1]) * size)
        body = {"kind": "migrate", "pnfsid": pnfsid, "path": str(path), "size": size,
                "storage_class": "atlas:tape", "checksum": adler32_file(path)}  # fmt: skip
        ids[pnfsid] = client.call("POST", "/v1/requests", body)["request"]["id"]

    final = {}
    for pnfsid, request_id in ids.items():
        got = client.call("GET", f"/v1/requests/{request_id}/wait?timeout=90", timeout=120)
        final[pnfsid] = got["request"]
    assert {p: r["state"] for p, r in final.items()} == {
        "A0": "done", "A1": "done", "A2": "done", "FF": "failed"
    }  # fmt: skip
    big = final["FF"]
    assert big["error_code"] == 31
    assert "no tape" in big["error"] and str(CAPACITY) in big["error"]
    assert big["attempts"] == 1  # permanent on the first attempt: no retry

    events = daemon.events()
    about_big = [e for e in events if e.get("pnfsid") == "FF" or e.get("request_id") == ids["FF"]]
    assert not [e for e in about_big if e.get("event") in ("backend.retry", "request.gave_up")]
    assert sum(e.get("event") == "session.start" for e in events) < 10, "a storm of sessions"
    # The put of a too-large file through the shim reports the permanent failure.
    path = pool / "FE"
    path.write_bytes(b"x" * (CAPACITY + 5))
    put = daemon.hsm("put", "FE", str(path), f"-si={storage_info(CAPACITY + 5)}", timeout=120)
    assert put.returncode == 31, put.stderr
    assert daemon.stop(signal.SIGTERM) == 0


def test_the_same_failure_three_times_ends_the_request(daemon: Daemon, tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    daemon.extra_env.update(
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_SIM_TAPE_CAPACITY=str(CAPACITY),
        TSSD_SIM_TAPES="1",
        TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="0.2",
        TSSD_BACKEND_MAX_SAME_FAILURES="3",
        TSSD_STORAGE_CLASSES='[{name = "atlas:tape"}, {name = "cms:tape"}]',
    )
    daemon.start()
    client = daemon.client()

    def migrate(pnfsid: str, storage_class: str) -> dict[str, object]:
        path = pool / pnfsid
        path.write_bytes(pnfsid.encode() * 5000)
        body = {"kind": "migrate", "pnfsid": pnfsid, "path": str(path), "size": 10_000,
                "storage_class": storage_class, "checksum": adler32_file(path)}  # fmt: skip
        request_id = client.call("POST", "/v1/requests", body)["request"]["id"]
        got = client.call("GET", f"/v1/requests/{request_id}/wait?timeout=90", timeout=120)
        request: dict[str, object] = got["request"]
        return request

    assert migrate("AA", "atlas:tape")["state"] == "done"
    # The only cartridge now belongs to atlas:tape: cms has no tape, session after session.
    failed = migrate("CC", "cms:tape")
    assert failed["state"] == "failed"
    assert "library full" in str(failed["error"]) and failed["error_code"] == 31
    assert failed["attempts"] == 3
    gave_up = [e for e in daemon.events() if e.get("event") == "request.gave_up"]
    assert [(e["pnfsid"], e["times"]) for e in gave_up] == [("CC", 3)]
    assert daemon.stop(signal.SIGTERM) == 0

"""Issue 17 point 6 against a real ``tssd serve``: ``"pnfsid": "BB01\\n"`` once passed
``re.match(...$)``, got past the one-open-request rule and wrote a second tape copy."""

from __future__ import annotations

import signal
import zlib
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.wire import ApiError

pytestmark = pytest.mark.slow


def test_trailing_newline_makes_no_second_request_nor_copy(daemon: Daemon, tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    src = pool / "BB01"
    src.write_bytes(b"tape me once" * 1000)
    adler = f"{zlib.adler32(src.read_bytes()):08x}"
    daemon.extra_env.update(TSSD_API_POOL_ROOTS=str(pool), TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="1")
    daemon.start()
    client = daemon.client()
    body = {"kind": "migrate", "pnfsid": "BB01", "path": str(src), "size": src.stat().st_size,
            "storage_class": "atlas:tape", "checksum": adler}  # fmt: skip
    first = client.call("POST", "/v1/requests", body)
    assert first["created"]
    request_id = first["request"]["id"]

    for bad in ("BB01\n", "BB01\r\n", "\nBB01", "BB01 ", "BB\n01"):
        with pytest.raises(ApiError) as refused:
            client.call("POST", "/v1/requests", body | {"pnfsid": bad})
        assert refused.value.status == 400, bad
    # Another spelling of the same pnfsid is the same file: it attaches.
    again = client.call("POST", "/v1/requests", body | {"pnfsid": "bb01"})
    assert (again["created"], again["request"]["id"]) == (False, request_id)
    # The shim refuses the newline itself (exit 32), before asking tssd.
    refused_hsm = daemon.hsm("put", "BB01\n", str(src), f"-si={storage_info(12000, adler)}")
    assert refused_hsm.returncode == 32, refused_hsm.stderr

    done = client.call("GET", f"/v1/requests/{request_id}/wait?timeout=60", timeout=90)
    assert done["request"]["state"] == "done", done
    with pytest.raises(ApiError) as late:
        client.call("POST", "/v1/requests", body | {"pnfsid": "BB01\n"})
    assert late.value.status == 400

    assert [r["id"] for r in daemon.requests()] == [request_id]
    copies = client.call("GET", "/v1/catalog/copies/bb01")["copies"]
    assert len(copies) == 1, copies
    with pytest.raises(ApiError) as where:
        client.call("GET", "/v1/catalog/copies/BB01%0A")
    assert where.value.status == 400
    with pytest.raises(ApiError) as latest:
        client.call("GET", "/v1/requests/latest?kind=migrate&pnfsid=BB01%0A")
    assert latest.value.status == 400
    assert daemon.stop(signal.SIGTERM) == 0

"""Prometheus metrics of the ENDIT intake: what an operator watches on a pool's directory.

The protocol steps follow ``neicnordic/dcache-endit-provider`` ``src/main/java/org/ndgf/
endit/StageTask.java`` (``in/<id>`` of the requested size is taken, ``request/<id>.err``
fails the stage), ``FlushTask.java`` (the flush is done once ``out/<id>`` is gone) and
``RemoveTask.java`` (``trash/<id>`` holds the URI).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_endit_worker import PNFSID, FakeBackend, finish, requests, stage_request

from tssd.backends.base import TapeCopy
from tssd.clock import RealClock
from tssd.config import EnditDirectory, EnditSettings
from tssd.config.storage_classes import StorageClassSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.lookups import SqlHistory
from tssd.db.models import State
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.endit import protocol
from tssd.endit.context import DirContext
from tssd.endit.dirs import EnditPaths
from tssd.endit.worker import DirectoryWorker
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[RequestStore]:
    engine = create_engine(sqlite_url)
    await ensure_schema(engine, auto_init=True)
    yield RequestStore(session_factory(engine), postgres=False)
    await engine.dispose()


@pytest.fixture
def base(tmp_path: Path) -> Path:
    for sub in ("in", "out", "request", "trash"):
        (tmp_path / "endit" / sub).mkdir(parents=True)
    return tmp_path / "endit"


def worker_with_metrics(
    store: RequestStore, base: Path, backend: FakeBackend
) -> tuple[DirectoryWorker, Metrics]:
    metrics = Metrics()
    ctx = DirContext(
        store,
        SqlHistory(store.sessions),
        EnditPaths(base),
        EnditDirectory(path=str(base), hsm_name="pool1"),
        EnditSettings(inotify=False, min_free_percent=0.0),
        "endit",
        metrics.endit,
        (StorageClassSettings("a:b"), StorageClassSettings("endit:default")),
    )
    retrier = Retrier(RetryPolicy(1, 0.0, 0.0), metrics, RealClock())
    return DirectoryWorker(ctx, backend, retrier), metrics  # type: ignore[arg-type]


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


async def test_intake_metrics(
    store: RequestStore, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = FakeBackend()
    worker, metrics = worker_with_metrics(store, base, backend)
    d = {"directory": str(base)}
    staged, failing, held = PNFSID, f"{PNFSID[:-1]}1", f"{PNFSID[:-1]}2"
    free = {"bytes": 25}
    monkeypatch.setattr(protocol, "free_bytes", lambda _d: (free["bytes"], 10**6))
    for name in (staged, failing, held):
        stage_request(base, name, 10)
    data = b"to tape"
    adler = f"{zlib.adler32(data):08x}"
    flushed = f"{PNFSID[:-1]}3"
    body = {"file_size": len(data), "storage_class": "a:b@osm", "action": "migrate",
            "checksumType": "adler32", "checksumValue": adler}  # fmt: skip
    (base / "request" / flushed).write_text(json.dumps(body))
    (base / "out" / flushed).write_bytes(data)
    trashed = f"{PNFSID[:-1]}4"
    backend.copies[trashed] = [
        TapeCopy(trashed, "b1", "VOL001", 1, 10, None, "a:b", datetime.now(UTC))
    ]
    (base / "trash" / trashed).write_text(f"osm://pool1?bfid={trashed}")
    await worker.reconcile()
    await worker.after()

    # Two 10-byte stages fit in 25 bytes: the third waits for space.
    assert value(metrics, "tssd_endit_requests_seen_total", action="recall", **d) == 2
    assert value(metrics, "tssd_endit_requests_seen_total", action="migrate", **d) == 1
    assert value(metrics, "tssd_endit_requests_seen_total", action="remove", **d) == 1
    assert value(metrics, "tssd_endit_stages_paused", **d) == 1

    rows = {r.pnfsid: r for r in await requests(store, "recall")}
    (base / "in" / staged).write_bytes(b"0123456789")
    await finish(store, rows[staged], State.DONE)
    await finish(store, rows[failing], State.FAILED, error="pool disk", error_code=43)
    [migration] = await requests(store, "migrate")
    await finish(store, migration, State.DONE, result_adler32=adler)
    free["bytes"] = 1000
    await worker.after()

    assert value(metrics, "tssd_endit_stages_delivered_total", **d) == 1
    assert value(metrics, "tssd_endit_flushes_acknowledged_total", **d) == 1
    # 43 would disable the pool: the .err carries 1 (docs/dcache.md, exit codes).
    assert value(metrics, "tssd_endit_errors_written_total", code="1", **d) == 1
    assert (base / "request" / f"{failing}.err").read_text().startswith("1\n")
    assert value(metrics, "tssd_endit_stages_paused", **d) == 0
    assert value(metrics, "tssd_endit_requests_seen_total", action="recall", **d) == 3
    assert b"tssd_endit_stages_delivered_total" in metrics.exposition()

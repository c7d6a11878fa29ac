"""The ENDIT directory worker against a real request store, with no scheduler running.

Each test drives the worker's passes by hand (``reconcile`` = full pass, ``after`` =
outcomes, cancels, admissions) and plays the scheduler through the store, so that every
outcome is deterministic.
"""

from __future__ import annotations

import asyncio
import json
import os
import zlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
from sqlalchemy import select

from tssd.backends.base import TapeCopy
from tssd.clock import RealClock
from tssd.config import EnditDirectory, EnditSettings
from tssd.config.storage_classes import StorageClassSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.lookups import SqlHistory
from tssd.db.models import Request, State
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.endit import protocol
from tssd.endit.context import DirContext
from tssd.endit.dirs import EnditPaths
from tssd.endit.worker import DirectoryWorker
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.submit import parse_submit

PNFSID = "0000ABCDEF0123456789ABCD"


class FakeBackend:
    """Only what the remove book asks: where the copies of a file are."""

    def __init__(self) -> None:
        self.copies: dict[str, list[TapeCopy]] = {}

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        return {p: self.copies[p] for p in pnfsids if p in self.copies}


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


#: The classes these tests flush; "endit:default" is a directory's class for old plugins.
ADMITTED = tuple(StorageClassSettings(n) for n in ("atlas:tape", "a:b", "endit:default"))


def make_worker(
    store: RequestStore, base: Path, backend: FakeBackend | None = None, **settings: Any
) -> DirectoryWorker:
    settings.setdefault("min_free_percent", 0.0)
    ctx = DirContext(
        store,
        SqlHistory(store.sessions),
        EnditPaths(base),
        EnditDirectory(path=str(base), hsm_name="pool1", priority=2),
        EnditSettings(inotify=False, **settings),
        "endit",
        storage_classes=ADMITTED,
    )
    retrier = Retrier(RetryPolicy(1, 0.0, 0.0), Metrics(), RealClock())
    return DirectoryWorker(ctx, backend or FakeBackend(), retrier)  # type: ignore[arg-type]


def stage_request(base: Path, name: str, size: int, text: str | None = None) -> None:
    body = {"file_size": size, "parent_pid": 1, "time": 1, "action": "recall"}
    body |= {"storage_class": "atlas:tape@osm", "path": "/pnfs/x"}
    (base / "request" / name).write_text(json.dumps(body) if text is None else text)


async def requests(store: RequestStore, kind: str) -> list[Request]:
    async with store.sessions() as session:
        stmt = select(Request).where(Request.kind == kind).order_by(Request.id)
        return list((await session.scalars(stmt)).all())


async def finish(store: RequestStore, row: Request, state: State, **values: Any) -> None:
    await store.scheduling.claim_ids([row.id])
    ending = store.finish if state is State.DONE else store.fail
    await ending(row.id, "test", **values)


async def test_stage_is_recorded_once_and_overwrite_keeps_it(
    store: RequestStore, base: Path
) -> None:
    worker = make_worker(store, base)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "recall")
    assert row.path == str(base / "in" / PNFSID)
    assert (row.size, row.queue, row.priority, row.hsm_instance) == (10, "endit", 2, "pool1")
    stage_request(base, PNFSID, 10)  # dCache retry: the file is written again
    await worker.handle({"request": {PNFSID}})
    await worker.reconcile()
    await worker.after()
    assert [r.id for r in await requests(store, "recall")] == [row.id]


async def test_partial_request_is_read_again_not_refused(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base)
    stage_request(base, PNFSID, 10, text='{"file_size": 10, "act')
    await worker.reconcile()
    await worker.after()
    assert await requests(store, "recall") == []
    assert not (base / "request" / f"{PNFSID}.err").exists()
    stage_request(base, PNFSID, 10)
    await worker.handle({})  # the retry needs no new event
    await worker.after()
    assert len(await requests(store, "recall")) == 1


async def test_deleted_request_is_cancelled_after_grace(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base, cancel_grace_s=0.0)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    (base / "request" / PNFSID).unlink()
    await worker.handle({"request": {PNFSID}})
    await worker.after()
    [row] = await requests(store, "recall")
    assert row.state == State.CANCELLED


async def test_cancel_that_crosses_the_delivery_leaves_no_file(
    store: RequestStore, base: Path
) -> None:
    worker = make_worker(store, base, cancel_grace_s=0.0, orphan_grace_s=0.0)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "recall")
    (base / "in" / PNFSID).write_bytes(b"0123456789")
    await finish(store, row, State.DONE)
    await worker.after()  # delivered while the request file is still there
    (base / "request" / PNFSID).unlink()  # dCache cancelled meanwhile: nobody takes it
    await worker.handle({"request": {PNFSID}})
    await worker.after()
    await worker.after()
    assert not (base / "in" / PNFSID).exists()


async def test_pool_restart_reissue_attaches(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base, cancel_grace_s=3600.0)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    (base / "request" / PNFSID).unlink()  # pool start wipes request/
    await worker.reconcile()
    await worker.after()
    stage_request(base, PNFSID, 10)  # and re-issues the stage
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "recall")
    assert row.state == State.QUEUED


async def test_failure_writes_err_once(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "recall")
    await finish(store, row, State.FAILED, error="no copy\nof the file", error_code=31)
    await worker.after()
    err = base / "request" / f"{PNFSID}.err"
    assert err.read_text() == "31\nno copy of the file\n"
    assert not [p for p in (base / "request").iterdir() if p.name.startswith(".")]
    err.unlink()  # the plugin takes the .err first, then the request file
    await worker.reconcile()
    await worker.after()
    assert not err.exists()
    assert len(await requests(store, "recall")) == 1
    (base / "request" / PNFSID).unlink()
    stage_request(base, PNFSID, 10)  # dCache retries later: a new request file
    await worker.reconcile()
    await worker.after()
    assert [r.state for r in await requests(store, "recall")] == ["failed", "queued"]


async def test_delivery_with_wrong_size_fails_the_stage(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "recall")
    (base / "in" / PNFSID).write_bytes(b"12345")
    await finish(store, row, State.DONE)
    await worker.after()
    assert not (base / "in" / PNFSID).exists()
    assert (base / "request" / f"{PNFSID}.err").read_text().startswith("1\n")


async def test_stages_wait_for_free_space(
    store: RequestStore, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free = {"bytes": 25}
    monkeypatch.setattr(protocol, "free_bytes", lambda _d: (free["bytes"], 10**6))
    worker = make_worker(store, base)
    for i in range(3):
        stage_request(base, f"{PNFSID[:-1]}{i}", 10)
    await worker.reconcile()
    await worker.after()
    assert len(await requests(store, "recall")) == 2  # 25 bytes: two 10-byte files fit
    assert worker.stages.paused
    free["bytes"] = 1000
    await worker.after()
    assert len(await requests(store, "recall")) == 3
    assert not worker.stages.paused


async def test_flush_unlinks_only_when_done(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base)
    data = b"hello tape"
    adler = f"{zlib.adler32(data):08x}"
    body = {"file_size": len(data), "storage_class": "atlas:tape@osm", "action": "migrate"}
    body |= {"checksumType": "adler32", "checksumValue": adler}
    (base / "request" / PNFSID).write_text(json.dumps(body))
    (base / "out" / PNFSID).write_bytes(data)
    await worker.reconcile()
    await worker.after()
    [row] = await requests(store, "migrate")
    assert (row.size, row.checksum, row.storage_class) == (len(data), adler, "atlas:tape@osm")
    assert (row.store, row.group) == ("atlas", "tape")
    assert (base / "out" / PNFSID).exists()
    await finish(store, row, State.FAILED, error_code=1, error="drive on fire")
    await worker.after()
    assert (base / "out" / PNFSID).exists()  # no error channel: the file stays
    await store.retry_request(row.id)  # an operator retries it
    await worker.reconcile()
    await finish(store, row, State.DONE, result_adler32=adler)
    await worker.after()
    assert not (base / "out" / PNFSID).exists()


async def test_flush_with_wrong_size_is_not_submitted(store: RequestStore, base: Path) -> None:
    worker = make_worker(store, base)
    body = {"file_size": 99, "storage_class": "a:b@osm", "action": "migrate"}
    (base / "request" / PNFSID).write_text(json.dumps(body))
    (base / "out" / PNFSID).write_bytes(b"short")
    await worker.reconcile()
    assert await requests(store, "migrate") == []
    assert (base / "out" / PNFSID).exists()


async def test_flush_of_a_class_no_table_admits_is_held_not_submitted(
    store: RequestStore, base: Path
) -> None:
    """An ENDIT flush is a submit like a put: a storage class no ``[[storage_classes]]``
    table admits claims no cartridge and records no request; its file stays in out/,
    the plugin's only signal (dcache-endit-provider's FlushTask waits while it exists)."""
    worker = make_worker(store, base)
    data = b"junk"
    body = {"file_size": len(data), "storage_class": "invented:class@osm", "action": "migrate"}
    (base / "request" / PNFSID).write_text(json.dumps(body))
    (base / "out" / PNFSID).write_bytes(data)
    with structlog.testing.capture_logs() as logs:
        await worker.reconcile()
        await worker.after()
    assert await requests(store, "migrate") == []
    assert (base / "out" / PNFSID).exists()
    [held] = [e for e in logs if e["event"] == "endit.flush_held"]
    assert "[[storage_classes]]" in held["error"]


async def test_trash_becomes_one_remove_per_copy(store: RequestStore, base: Path) -> None:
    backend = FakeBackend()
    at = datetime.now(UTC)
    backend.copies[PNFSID] = [
        TapeCopy(PNFSID, f"bfid{i}", "VOL001", i, 10, None, "a:b", at) for i in range(2)
    ]
    worker = make_worker(store, base, backend)
    (base / "trash" / PNFSID).write_text(f"osm://pool1?bfid={PNFSID}")
    await worker.reconcile()
    rows = await requests(store, "remove")
    assert sorted(r.bfid or "" for r in rows) == ["bfid0", "bfid1"]
    assert not (base / "trash" / PNFSID).exists()


async def test_restart_reconciles_with_the_database(store: RequestStore, base: Path) -> None:
    first = make_worker(store, base)
    stage_request(base, PNFSID, 10)
    other = f"{PNFSID[:-1]}0"
    stage_request(base, other, 10)
    await first.reconcile()
    await first.after()
    # tssd is down; the pool withdraws one stage and hands over a flush.
    (base / "request" / PNFSID).unlink()
    (base / "out" / other).write_bytes(b"x")
    second = make_worker(store, base, cancel_grace_s=0.0)
    await second.reconcile()
    await second.after()
    states = {r.pnfsid: r.state for r in await requests(store, "recall")}
    assert states == {PNFSID: "cancelled", other: "queued"}
    assert len(await requests(store, "migrate")) == 1


async def test_delivered_file_orphaned_across_a_restart_is_removed(
    store: RequestStore, base: Path
) -> None:
    # tssd delivered in/<id> and stopped; dCache cancelled the stage meanwhile (the request
    # file is gone for good). The new daemon's first full pass finds the stray file.
    (base / "in" / PNFSID).write_bytes(b"0123456789")
    (base / "in" / f"{PNFSID[:-1]}1").write_bytes(b"kept")
    stage_request(base, f"{PNFSID[:-1]}1", 4)  # still requested: the plugin takes it
    worker = make_worker(store, base, orphan_grace_s=0.0)
    await worker.reconcile()
    await worker.after()
    assert not (base / "in" / PNFSID).exists()
    assert (base / "in" / f"{PNFSID[:-1]}1").exists()


async def test_stray_file_is_kept_while_its_stage_may_be_reissued(
    store: RequestStore, base: Path
) -> None:
    (base / "in" / PNFSID).write_bytes(b"0123456789")
    worker = make_worker(store, base, orphan_grace_s=3600.0)
    await worker.reconcile()
    await worker.after()
    assert (base / "in" / PNFSID).exists()  # a pool restart re-issues within the grace


async def test_fifos_and_symlinks_in_the_directories_neither_hang_nor_leak(
    store: RequestStore, base: Path, tmp_path: Path
) -> None:
    # Anyone who can write into the ENDIT directories may plant these (issue 17.1, 17.3).
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789")
    other = f"{PNFSID[:-1]}2"
    os.mkfifo(base / "request" / PNFSID)
    os.mkfifo(base / "trash" / PNFSID)
    body = {"file_size": 10, "storage_class": "atlas:tape@osm", "action": "migrate"}
    (base / "request" / other).write_text(json.dumps(body))
    (base / "out" / other).symlink_to(secret)
    worker = make_worker(store, base)
    await asyncio.wait_for(worker.reconcile(), timeout=30)
    await asyncio.wait_for(worker.after(), timeout=30)
    assert await requests(store, "migrate") == []
    assert await requests(store, "remove") == []
    assert await requests(store, "recall") == []


async def test_later_passes_read_only_what_changed(store: RequestStore, base: Path) -> None:
    # After the first full pass a rescan reads the request events since the last one, not
    # every open request (issue 22): what another daemon opened or finished is still seen.
    worker = make_worker(store, base)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    (mine,) = await requests(store, "recall")
    assert mine.id in worker.stages.by_id
    other_daemon = RequestStore(store.sessions, postgres=False)  # its notifier is not ours
    other = f"{PNFSID[:-1]}3"
    spec = parse_submit({"kind": "recall", "pnfsid": other, "path": str(base / "in" / other)})
    ((_, opened),) = await other_daemon.submit([spec])
    await finish(other_daemon, mine, State.FAILED, error="drive on fire")
    assert worker._events_seen is not None
    await worker.reconcile()
    await worker.after()
    assert opened.id in worker.stages.by_id
    assert mine.id not in worker.stages.by_id
    seen = worker._events_seen
    await worker.reconcile()  # the last window once more, then nothing new
    await worker.reconcile()
    assert worker._events_seen > seen and opened.id in worker.stages.by_id

"""An ENDIT directory worker on the in-memory store and its request history
(tssd/db/memory_history.py): no SQL anywhere, the passes as on a database."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_endit_worker import ADMITTED, PNFSID, FakeBackend, stage_request

from tssd.clock import RealClock
from tssd.config import EnditDirectory, EnditSettings
from tssd.db.memory import MemoryStore
from tssd.db.memory_history import MemoryHistory
from tssd.domain import State
from tssd.endit.context import DirContext
from tssd.endit.dirs import EnditPaths
from tssd.endit.worker import DirectoryWorker
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.submit import parse_submit


@pytest.fixture
def base(tmp_path: Path) -> Path:
    for sub in ("in", "out", "request", "trash"):
        (tmp_path / "endit" / sub).mkdir(parents=True)
    return tmp_path / "endit"


def memory_worker(store: MemoryStore, base: Path) -> DirectoryWorker:
    ctx = DirContext(
        store,
        MemoryHistory(store),
        EnditPaths(base),
        EnditDirectory(path=str(base), hsm_name="pool1", priority=2),
        EnditSettings(inotify=False, min_free_percent=0.0),
        "endit",
        storage_classes=ADMITTED,
    )
    retrier = Retrier(RetryPolicy(1, 0.0, 0.0), Metrics(), RealClock())
    return DirectoryWorker(ctx, FakeBackend(), retrier)  # type: ignore[arg-type]


async def test_a_worker_adopts_and_drops_requests_through_the_memory_history(
    base: Path,
) -> None:
    store = MemoryStore()
    worker = memory_worker(store, base)
    stage_request(base, PNFSID, 10)
    await worker.reconcile()
    await worker.after()
    [mine] = await MemoryHistory(store).all_recalls()
    assert (mine.path, mine.state) == (str(base / "in" / PNFSID), "queued")
    assert mine.id in worker.stages.by_id
    # Opened elsewhere (another daemon's intake): the next pass reads it from the events.
    other = f"{PNFSID[:-1]}3"
    spec = parse_submit({"kind": "recall", "pnfsid": other, "path": str(base / "in" / other)})
    [(_, opened)] = await store.submit([spec])
    await store.scheduling.claim_ids([mine.id])
    assert await store.fail(mine.id, "test", error="drive on fire")
    await worker.reconcile()
    await worker.after()
    assert opened.id in worker.stages.by_id
    assert mine.id not in worker.stages.by_id
    assert (await store.get(mine.id)).state == State.FAILED

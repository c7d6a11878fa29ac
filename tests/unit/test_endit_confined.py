"""The ENDIT directories confined: planted symlinks, odd entries, dead pools, late files.

Each test plants real symlinks, directories and files in a real directory and drives the
worker's passes by hand against a real request store (as tests/unit/test_endit_worker.py
does). Where a test models the endit provider, the plugin's source read is
neicnordic/dcache-endit-provider ``src/main/java/org/ndgf/endit/StageTask.java``; where it
models ENDIT's own daemon, neicnordic/endit ``tsmretriever.pl``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.unit.test_endit_worker import (
    PNFSID,
    FakeBackend,
    finish,
    make_worker,
    requests,
    stage_request,
)
from tssd.config import EnditDirectory, EnditSettings, Settings
from tssd.db.engine import create_engine, session_factory
from tssd.db.lookups import SqlHistory
from tssd.db.models import State
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.endit.dirs import EnditPaths
from tssd.endit.service import endit_intake
from tssd.endit.worker import DirectoryWorker
from tssd.metrics import Metrics

OTHER = f"{PNFSID[:-1]}7"


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


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory outside the ENDIT directory with files named like protocol files."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / PNFSID).write_text("precious")
    (target / OTHER).write_text("precious too")
    return target


def swap_for_symlink(base: Path, sub: str, target: Path) -> None:
    (base / sub).rmdir()
    (base / sub).symlink_to(target, target_is_directory=True)


def untouched(target: Path) -> bool:
    return (target / PNFSID).read_text() == "precious" and (target / OTHER).exists()


async def passes(worker: DirectoryWorker, count: int = 2) -> None:
    for _ in range(count):
        await worker.reconcile()
        await worker.after()


# -- point 1: every operation relative to the held-open directory --------------------------


async def test_symlink_at_the_err_temp_name_is_not_followed(
    store: RequestStore, base: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "tssd.db.victim"
    victim.write_text("precious")
    (base / "request" / f".{PNFSID}.err.tssd-part").symlink_to(victim)
    stage_request(base, PNFSID, 0, text=json.dumps({"file_size": "ten", "action": "recall"}))
    worker = make_worker(store, base)
    await passes(worker, 1)
    assert victim.read_text() == "precious"
    assert (base / "request" / f"{PNFSID}.err").read_text().startswith("32\n")
    assert not (base / "request" / f".{PNFSID}.err.tssd-part").exists()


async def test_symlinked_in_is_refused_and_its_target_untouched(
    store: RequestStore, base: Path, elsewhere: Path
) -> None:
    swap_for_symlink(base, "in", elsewhere)
    refused: list[str] = []
    worker = make_worker(store, base, cancel_grace_s=0.0, orphan_grace_s=0.0)
    worker.ctx.paths = EnditPaths(base, on_refused=refused.append)
    with capture_logs() as logs:
        await passes(worker, 3)
    assert untouched(elsewhere)
    assert refused == ["in"]  # counted once, not at every pass
    events = [e for e in logs if e["event"] == "endit.dir_refused"]
    assert [e["subdir"] for e in events] == ["in"]


async def test_symlinked_trash_is_refused_and_its_target_untouched(
    store: RequestStore, base: Path, elsewhere: Path
) -> None:
    (elsewhere / PNFSID).write_text(f"osm://pool1?bfid={PNFSID}")
    swap_for_symlink(base, "trash", elsewhere)
    worker = make_worker(store, base)
    await worker.handle({"trash": {PNFSID}})  # an inotify hint for the name, too
    await passes(worker)
    assert (elsewhere / PNFSID).exists() and (elsewhere / OTHER).exists()
    assert await requests(store, "remove") == []


async def test_symlinked_out_is_refused_and_its_target_untouched(
    store: RequestStore, base: Path, elsewhere: Path
) -> None:
    body = {"file_size": 8, "storage_class": "atlas:tape@osm", "action": "migrate"}
    (base / "request" / PNFSID).write_text(json.dumps(body))
    swap_for_symlink(base, "out", elsewhere)
    worker = make_worker(store, base)
    await passes(worker)
    assert untouched(elsewhere)
    assert await requests(store, "migrate") == []


async def test_symlinked_request_is_refused_and_nothing_written_there(
    store: RequestStore, base: Path, elsewhere: Path
) -> None:
    (elsewhere / PNFSID).write_text(json.dumps({"file_size": "x", "action": "recall"}))
    swap_for_symlink(base, "request", elsewhere)
    worker = make_worker(store, base)
    await worker.handle({"request": {PNFSID}})
    await passes(worker)
    assert await requests(store, "recall") == []
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted([PNFSID, OTHER])


async def test_base_swapped_after_start_is_not_followed(
    store: RequestStore, base: Path, tmp_path: Path
) -> None:
    worker = make_worker(store, base, cancel_grace_s=0.0, orphan_grace_s=0.0)
    evil = tmp_path / "evil"
    for sub in ("in", "out", "request", "trash"):
        (evil / sub).mkdir(parents=True)
    (evil / "in" / PNFSID).write_text("precious")
    moved = tmp_path / "moved"
    base.rename(moved)
    base.symlink_to(evil, target_is_directory=True)
    stage_request(moved, OTHER, 4)
    await passes(worker)
    assert (evil / "in" / PNFSID).read_text() == "precious"
    [row] = await requests(store, "recall")  # the directory opened at start is served
    assert row.pnfsid == OTHER


# -- point 12: an odd entry in in/ is ignored ----------------------------------------------


async def test_a_directory_in_in_is_ignored_and_said_once(store: RequestStore, base: Path) -> None:
    (base / "in" / PNFSID).mkdir()
    (base / "in" / PNFSID / "inside").write_text("x")
    worker = make_worker(store, base, cancel_grace_s=0.0, orphan_grace_s=0.0)
    stage_request(base, OTHER, 4)
    with capture_logs() as logs:
        await passes(worker, 3)
    assert (base / "in" / PNFSID / "inside").exists()
    [row] = await requests(store, "recall")  # the passes go on
    assert row.pnfsid == OTHER
    said = [e for e in logs if e["event"] == "endit.not_a_file"]
    assert [(e["subdir"], e["name"]) for e in said] == [("in", PNFSID)]
    assert not [e for e in logs if e["event"] == "endit.pass_failed"]


# -- point 15: dead pools, late files, instance names --------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def recall_body(parent_pid: int) -> str:
    return json.dumps({"file_size": 4, "parent_pid": parent_pid, "action": "recall"})


async def test_stage_of_a_dead_pool_process_is_dropped(store: RequestStore, base: Path) -> None:
    """tsmretriever.pl's ``checkrequest`` removes a request file whose ``parent_pid``
    (the pool's JVM, StageTask's ``getpid()``) no longer exists, and never recalls it."""
    stage_request(base, PNFSID, 4, text=recall_body(dead_pid()))
    worker = make_worker(store, base)
    with capture_logs() as logs:
        await passes(worker)
    assert await requests(store, "recall") == []
    assert not (base / "request" / PNFSID).exists()
    assert [e["pnfsid"] for e in logs if e["event"] == "endit.stage_dropped"] == [PNFSID]


async def test_recall_of_a_pool_that_died_is_cancelled(store: RequestStore, base: Path) -> None:
    pool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stage_request(base, PNFSID, 4, text=recall_body(pool.pid))
        worker = make_worker(store, base, cancel_grace_s=0.0)
        await passes(worker)
        [row] = await requests(store, "recall")
        assert row.state == State.QUEUED
    finally:
        pool.kill()
        pool.wait()
    await passes(worker)
    [row] = await requests(store, "recall")
    assert row.state == State.CANCELLED
    assert not (base / "request" / PNFSID).exists()


async def test_parent_pid_check_can_be_turned_off(store: RequestStore, base: Path) -> None:
    stage_request(base, PNFSID, 4, text=recall_body(dead_pid()))
    worker = make_worker(store, base, check_parent_pid=False)
    await passes(worker)
    assert len(await requests(store, "recall")) == 1


async def test_recall_finishing_after_a_cancel_leaves_no_file(
    store: RequestStore, base: Path
) -> None:
    """StageTask.abort deletes the request file and not ``in/<id>``: once the stage is
    cancelled, nobody takes a file delivered later. The default graces apply."""
    worker = make_worker(store, base)
    clock = [0.0]
    worker.stages.now = lambda: clock[0]
    stage_request(base, PNFSID, 4)
    await passes(worker, 1)
    [row] = await requests(store, "recall")
    (base / "request" / PNFSID).unlink()  # dCache cancelled the stage
    await worker.handle({"request": {PNFSID}})
    clock[0] = 15.0  # the tape read ends within the cancel grace
    (base / "in" / PNFSID).write_bytes(b"data")
    await finish(store, row, State.DONE)
    await worker.after()
    assert not (base / "in" / PNFSID).exists()


async def test_file_the_plugin_is_moving_is_left_alone(store: RequestStore, base: Path) -> None:
    """StageTask.poll deletes the request file, sleeps GRACE_PERIOD (1 s), then moves
    ``in/<id>`` into the pool: tssd must not remove it in between."""
    worker = make_worker(store, base)
    clock = [0.0]
    worker.stages.now = lambda: clock[0]
    stage_request(base, PNFSID, 4)
    await passes(worker, 1)
    [row] = await requests(store, "recall")
    (base / "in" / PNFSID).write_bytes(b"data")
    await finish(store, row, State.DONE)
    await worker.after()
    (base / "request" / PNFSID).unlink()  # the plugin's poll saw the right size
    await worker.handle({"request": {PNFSID}})
    clock[0] = 1.5  # a slow pool: the move is late
    await worker.after()
    assert (base / "in" / PNFSID).exists()


async def test_a_remove_naming_another_instance_is_reported(
    store: RequestStore, base: Path
) -> None:
    """dCache's HsmSet.getInstanceName (and the cleaner's getNearlineStorageByName) hand a
    file to the pool's HSM instance that its URI names: a trash URI naming another
    instance means the directory's ``hsm_name`` is not the pool's instance name."""
    (base / "trash" / PNFSID).write_text(f"osm://pool1?bfid={PNFSID}")
    (base / "trash" / OTHER).write_text(f"osm://pool9?bfid={OTHER}")
    worker = make_worker(store, base)  # hsm_name = "pool1"
    with capture_logs() as logs:
        await passes(worker, 1)
    said = [e for e in logs if e["event"] == "endit.instance_mismatch"]
    assert [(e["hsm_name"], e["uri_instances"]) for e in said] == [("pool1", ["pool9"])]
    assert len(await requests(store, "remove")) == 2  # dCache asked: removed all the same


async def test_base_created_after_start_is_opened_then(tmp_path: Path) -> None:
    real = tmp_path / "real"
    link = tmp_path / "configured"
    link.symlink_to(real, target_is_directory=True)
    paths = EnditPaths(link)  # the pool's directory is not there yet
    assert paths.listing("in") is None
    (real / "in").mkdir(parents=True)
    (real / "in" / PNFSID).write_text("x")
    with capture_logs() as logs:
        listing = paths.listing("in")
    assert listing is not None and listing.files == {PNFSID}
    [opened] = [e for e in logs if e["event"] == "endit.root_opened"]
    assert opened["resolved"] == str(real)
    paths.close()


async def test_a_refused_directory_is_counted_by_the_daemon(
    store: RequestStore, base: Path, elsewhere: Path
) -> None:
    swap_for_symlink(base, "request", elsewhere)
    settings = Settings(
        endit=EnditSettings(directories=(EnditDirectory(path=str(base)),), inotify=False)
    )
    metrics = Metrics()
    labels = {"directory": str(base), "subdir": "request"}
    history = SqlHistory(store.sessions)
    async with endit_intake(settings, store, history, FakeBackend(), metrics):  # type: ignore[arg-type]
        for _ in range(500):
            if metrics.registry.get_sample_value("tssd_endit_dirs_refused_total", labels):
                break
            await asyncio.sleep(0.02)
    assert metrics.registry.get_sample_value("tssd_endit_dirs_refused_total", labels) == 1.0


async def test_a_refused_request_directory_cancels_nothing(
    store: RequestStore, base: Path, tmp_path: Path
) -> None:
    worker = make_worker(store, base, cancel_grace_s=0.0)
    stage_request(base, PNFSID, 4)
    await passes(worker, 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    (base / "request" / PNFSID).unlink()
    swap_for_symlink(base, "request", empty)
    await passes(worker)
    [row] = await requests(store, "recall")
    assert row.state == State.QUEUED  # an unreadable request/ says nothing about its files


async def test_directories_of_one_instance_name_share_the_files(
    store: RequestStore, base: Path, tmp_path: Path
) -> None:
    """Pools that stage each other's files use one HSM instance name (dCache's
    ``HsmSet.getInstanceName`` routes a stage by the URI's authority): a file flushed
    through one directory is recalled into the other one that asks."""
    other = tmp_path / "pool2"
    for sub in ("in", "out", "request", "trash"):
        (other / sub).mkdir(parents=True)
    first, second = make_worker(store, base), make_worker(store, other)  # both "pool1"
    body = {"file_size": 4, "storage_class": "atlas:tape@osm", "action": "migrate"}
    (base / "request" / PNFSID).write_text(json.dumps(body))
    (base / "out" / PNFSID).write_bytes(b"data")
    await passes(first, 1)
    [flush] = await requests(store, "migrate")
    await finish(store, flush, State.DONE)
    stage_request(other, PNFSID, 4)
    await passes(second, 1)
    [recall] = await requests(store, "recall")
    assert recall.path == str(other / "in" / PNFSID)
    assert recall.hsm_instance == flush.hsm_instance == "pool1"

"""Reliability guards in isolation: drive/tape health, disk backpressure, requeue backoff,
database retries (a real SQLite lock), pool roots, and no shell anywhere."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backpressure import Backpressure
from tssd.clock import RealClock
from tssd.db import engine as db_engine
from tssd.db.health import SqlHealth
from tssd.db.models import Drive, Kind, Request, State, Tape
from tssd.db.store import RequestStore
from tssd.errors import (
    InvalidRequest,
    NoSpace,
    ObjectNotFound,
    PermanentBackendError,
    TransientBackendError,
)
from tssd.files import PoolRoots, effective_roots
from tssd.health import Health
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.submit import SubmitSpec

ROOT = Path(__file__).resolve().parents[2]


class FakeDrive:
    def __init__(self, name: str) -> None:
        self.name = name
        self.enabled = True


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    value = metrics.registry.get_sample_value(name, labels or {})
    return value or 0.0


# -- health ----------------------------------------------------------------------------


async def test_a_drive_failing_repeatedly_is_taken_out_of_service(
    sessions: async_sessionmaker[Any],
) -> None:
    async with sessions.begin() as s:
        s.add(Drive(name="d0", enabled=True))
    metrics = Metrics()
    disabled: list[bool] = []
    health = Health(
        SqlHealth(sessions),
        metrics,
        drive_max_failures=3,
        on_drive_disabled=lambda: disabled.append(True),
    )
    drive = FakeDrive("d0")
    err = TransientBackendError("simulated IBM SP error 12")
    assert not await health.failed(drive, "V1", err, op="mount")
    assert not await health.failed(drive, "V2", err, op="mount")
    health.succeeded(drive, "V3")  # a success in between: the count starts again
    assert not await health.failed(drive, "V4", err, op="read")
    # Not the drive's fault:
    assert not await health.failed(drive, "V5", ObjectNotFound("gone"), op="read")
    assert not await health.failed(drive, "V6", err, op="read")
    # The third in a row: out of service (its owner, the DriveManager, takes it out).
    assert await health.failed(drive, "V7", PermanentBackendError("124"), op="write")
    assert disabled == [True]
    async with sessions() as s:
        assert (await s.get(Drive, "d0")).enabled is False  # type: ignore[union-attr]
    assert sample(metrics, "tssd_drives_disabled_total") == 1
    assert sample(metrics, "tssd_hardware_failures_total", {"op": "read"}) == 2


async def test_a_tape_failing_on_three_drives_is_marked_suspect(
    sessions: async_sessionmaker[Any],
) -> None:
    metrics = Metrics()
    health = Health(SqlHealth(sessions), metrics, drive_max_failures=0, tape_suspect_drives=3)
    err = TransientBackendError("simulated IBM SP error 14")
    d0, d1, d2 = FakeDrive("d0"), FakeDrive("d1"), FakeDrive("d2")
    await health.failed(d0, "T1", err, op="read")
    await health.failed(d0, "T1", err, op="read")  # the same drive twice is one drive
    await health.failed(d1, "T1", err, op="mount")
    health.succeeded(d1, "T1")  # read fine after all: forget
    await health.failed(d1, "T1", err, op="read")
    await health.failed(d2, "T1", err, op="read")
    assert health.suspect == set()
    await health.failed(d0, "T1", err, op="read")
    assert health.suspect == {"T1"}
    async with sessions() as s:
        assert (await s.get(Tape, "T1")).state == "suspect"  # type: ignore[union-attr]
    assert sample(metrics, "tssd_tapes_suspect_total") == 1
    assert d0.enabled and d1.enabled and d2.enabled  # drive_max_failures=0: never


# -- backpressure ----------------------------------------------------------------------


def recall(i: int, path: str, size: int = 100) -> Request:
    return Request(id=i, kind=Kind.RECALL, state=State.QUEUED, path=path, size=size)


def test_backpressure_holds_and_releases_a_full_file_system(tmp_path: Path) -> None:
    free = {"bytes": 1000}
    released: list[bool] = []
    bp = Backpressure(
        min_free_bytes=500, recheck_s=0.0, probe=lambda _mount: (free["bytes"], 10_000),
        on_release=lambda: released.append(True),
    )  # fmt: skip
    dest = str(tmp_path / "f")
    ok, held = bp.admit([recall(1, dest, 300), recall(2, dest, 300)])
    # The first fits (1000 - 300 >= 500); both together would not.
    assert [r.id for r in ok] == [1] and [r.id for r in held] == [2]
    assert len(bp.full) == 1
    reason = bp.held_reason(recall(2, dest))
    assert reason is not None and "nearly full" in reason
    assert bp.held_reason(Request(id=3, kind=Kind.MIGRATE, state=State.QUEUED, path=dest)) is None
    free["bytes"] = 700  # the first was written
    assert bp.recheck(force=True) == []  # the second still does not fit
    free["bytes"] = 5000
    assert bp.recheck(force=True) == [_mount_of(tmp_path)]
    assert bp.full == {}
    assert released == [True] and bp.held_reason(recall(2, dest)) is None


def _mount_of(path: Path) -> str:
    from tssd.backpressure import mount_point

    return mount_point(str(path))


def test_backpressure_percent_threshold_and_enospc(tmp_path: Path) -> None:
    bp = Backpressure(min_free_percent=10.0, probe=lambda _m: (900, 10_000))
    dest = str(tmp_path / "f")
    ok, held = bp.admit([recall(1, dest, 0)])  # 9 % free: below 10 %
    assert ok == [] and [r.id for r in held] == [1]
    bp2 = Backpressure(min_free_percent=0.0, probe=lambda _m: (10**9, 10**10))
    assert bp2.absorbs(recall(5, dest), NoSpace("ENOSPC")) is True
    assert bp2.absorbs(recall(6, dest), TransientBackendError("x")) is False
    assert list(bp2.full) == [_mount_of(tmp_path)]


async def test_backpressure_clauses_leave_out_recalls_into_full_file_systems(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    full_dir, free_dir = tmp_path / "full", tmp_path / "free_%_dir"
    store = RequestStore(sessions, postgres=False)
    specs = [
        SubmitSpec(kind=Kind.RECALL, key=f"{i:X}", pnfsid=f"{i:X}", path=str(d / "f"))
        for i, d in ((1, full_dir), (2, free_dir))
    ]
    await store.submit(specs)
    bp = Backpressure(min_free_bytes=1, probe=lambda _m: (0, 100))
    bp.full[str(full_dir)] = _entry(str(full_dir))
    async with sessions() as s:
        rows = (await s.scalars(select(Request.pnfsid).where(*bp.clauses()))).all()
    assert rows == ["2"]


def _entry(mount: str) -> Any:
    from tssd.backpressure import FullFs

    return FullFs(mount, 0, 100, 0.0)


# -- backoff of per-file transient errors ------------------------------------------------


async def test_requeue_waits_for_the_backoff_delay() -> None:
    retrier = Retrier(RetryPolicy(attempts=5, base_s=0.05, max_s=1.0), Metrics(), RealClock())
    ran = asyncio.Event()

    async def requeue() -> None:
        ran.set()

    delay = retrier.later(3, requeue)
    assert delay == pytest.approx(0.2)  # 0.05 * 2**2
    assert retrier.waiting == 1 and not ran.is_set()
    await asyncio.wait_for(ran.wait(), timeout=10)
    await asyncio.sleep(0)
    assert retrier.waiting == 0


def test_per_file_retries_count_failures_not_claims() -> None:
    retrier = Retrier(RetryPolicy(attempts=3, base_s=0.0, max_s=0.0), Metrics(), RealClock())
    err = TransientBackendError("simulated IBM SP error 14")
    # The request was claimed 9 times (sessions ended, crashes) but failed only now.
    assert retrier.another_attempt(9, op="recall_item", error=err, request_id=7)
    assert retrier.another_attempt(9, op="recall_item", error=err, request_id=7)
    assert not retrier.another_attempt(9, op="recall_item", error=err, request_id=7)
    assert retrier.another_attempt(1, op="recall_item", error=err, request_id=7)  # forgotten
    assert not retrier.another_attempt(3, op="recall_item", error=err)  # no id: claims count


# -- database: transient errors are retried --------------------------------------------


def test_transient_database_errors_are_recognised() -> None:
    locked = OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))
    assert db_engine.is_transient(locked)
    assert db_engine.is_transient(ConnectionRefusedError(111, "refused"))
    missing = OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))
    assert not db_engine.is_transient(missing)
    assert not db_engine.is_transient(ValueError("bug"))


async def test_a_locked_sqlite_database_is_waited_for(tmp_path: Path) -> None:
    """Another process holds the write lock longer than the busy timeout: retried, not lost."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}"
    engine = db_engine.create_engine(url, busy_timeout_s=0.05)
    try:
        from tssd.db.models import Base

        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        store = RequestStore(db_engine.session_factory(engine), postgres=False)
        [(_, row)] = await store.submit([SubmitSpec(kind=Kind.RECALL, key="AB", pnfsid="AB")])
        blocker = sqlite3.connect(
            tmp_path / "tssd.db", isolation_level=None, check_same_thread=False
        )
        blocker.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.5, blocker.execute, args=("COMMIT",))
        release.start()
        try:
            claimed = await store.scheduling.claim_ids([row.id], "d0")
        finally:
            release.join()
            blocker.close()
        assert [r.id for r in claimed] == [row.id]
        assert (await store.get(row.id)).state == State.ACTIVE
    finally:
        await engine.dispose()


# -- pool roots --------------------------------------------------------------------------


def test_pool_roots_refuse_paths_outside(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    (pool / "data").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pool / "data" / "escape").symlink_to(elsewhere)
    (pool / "data" / "inside-link").symlink_to(pool / "data")
    roots = PoolRoots((str(pool),))
    roots.check(str(pool / "data" / "f"), "recall destination")
    roots.check(str(pool / "data" / "inside-link" / "f"), "recall destination")
    for bad in (
        f"{pool}/data/../../elsewhere/f",  # '..' out of the root
        str(pool / "data" / "escape" / "f"),  # a symlinked directory leading out
        "/etc/passwd",  # an absolute path elsewhere
        str(tmp_path / "pool-sibling" / "f"),  # a prefix of the root's name is not inside
    ):
        with pytest.raises(InvalidRequest, match="pool root"):
            roots.check(bad, "recall destination")
    # A destination that is itself a symlink out of the root is refused too.
    (pool / "data" / "trap").symlink_to(elsewhere / "target")
    with pytest.raises(InvalidRequest):
        roots.check(str(pool / "data" / "trap"), "recall destination")
    # No roots reach nothing; a daemon without api.pool_roots has $TSSD_HOME/pools, and
    # "/" is the explicit way to lift the confinement.
    assert not PoolRoots(()).contains("/anywhere")
    assert effective_roots("", tmp_path) == str(tmp_path / "pools")
    assert effective_roots(str(pool), tmp_path) == str(pool)
    assert PoolRoots(("/",)).contains("/anywhere")
    assert PoolRoots.from_setting(f" {pool} , {elsewhere} ").roots == (
        os.path.realpath(pool),
        os.path.realpath(elsewhere),
    )


def test_no_request_data_reaches_a_shell() -> None:
    pattern = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "tssd").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []

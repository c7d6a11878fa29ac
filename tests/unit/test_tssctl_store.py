"""The operator queries (tssd/db/admin.py) and the efficiency report (tssd/db/reports.py)
on SQLite and PostgreSQL, from a hand-made mount history with known answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.config.sections import SchedulerSettings
from tssd.db.admin import AdminStore
from tssd.db.counts import Counts
from tssd.db.engine import create_engine, session_factory
from tssd.db.gauges import GaugeStore
from tssd.db.models import Base, Drive, Mount, QueueRow, Request, Tape
from tssd.db.reports import ReportStore
from tssd.errors import NotFound
from tssd.metrics import Metrics
from tssd.metrics_db import refresh
from tssd.ports.reports import MountFilter

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DAY2 = timedelta(days=2)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield session_factory(engine)
    finally:
        await engine.dispose()


def done(rid: int, queue: str, volume: str, drive: str, finished: float, size: int) -> Request:
    return Request(
        id=rid, kind="recall", state="done", key=f"{rid:X}", pnfsid=f"{rid:X}", queue=queue,
        volume=volume, drive=drive, size=size, created_at=at(-60), finished_at=at(finished),
    )  # fmt: skip


@pytest.fixture
async def history(sessions: async_sessionmaker[Any]) -> async_sessionmaker[Any]:
    """VOL1 mounted twice on d0 (one remount), VOL2 once on d1, VOL3 still mounted on d1."""
    async with sessions.begin() as s:
        s.add_all([
            Drive(name="d0", enabled=True, state="empty"),
            Drive(name="d1", enabled=True, state="mounted", volume="VOL3"),
            Tape(volume="VOL1", mounts=2, last_mounted_at=at(1000)),
            Tape(volume="VOL2", mounts=1, last_mounted_at=at(0)),
            Tape(volume="VOL3", mounts=1, last_mounted_at=at(2000)),
            # held 100 s, 50 s transferring: 50 %
            Mount(id=1, drive="d0", volume="VOL1", purpose="recall", requested_at=at(0),
                  ready_at=at(20), dismounted_at=at(100), files=2, bytes=300, transfer_s=50.0),
            # held 200 s, 20 s transferring: 10 %
            Mount(id=2, drive="d1", volume="VOL2", purpose="recall", requested_at=at(10),
                  ready_at=at(40), dismounted_at=at(210), files=1, bytes=100, transfer_s=20.0),
            # the remount of VOL1: held 100 s, 30 s transferring
            Mount(id=3, drive="d0", volume="VOL1", purpose="recall", requested_at=at(1000),
                  ready_at=at(1030), dismounted_at=at(1100), files=1, bytes=200, transfer_s=30.0),
            Mount(id=4, drive="d1", volume="VOL3", purpose="recall", requested_at=at(2000),
                  ready_at=at(2010), files=0, bytes=0, transfer_s=0.0),
        ])  # fmt: skip
        await s.flush()
        s.add_all([
            done(1, "atlas", "VOL1", "d0", 50, 100),
            done(2, "cms", "VOL1", "d0", 90, 200),
            done(3, "atlas", "VOL2", "d1", 150, 100),
            done(4, "atlas", "VOL1", "d0", 1050, 200),
            Request(id=5, kind="recall", state="queued", key="5", pnfsid="5", queue="cms",
                    volume="VOL4", size=7, created_at=at(1500)),
        ])  # fmt: skip
    return sessions


async def test_mount_history_has_the_metric_definitions(history: async_sessionmaker[Any]) -> None:
    admin = AdminStore(history)
    mounts, nxt = await admin.mounts(MountFilter())
    assert nxt is None
    assert [m["id"] for m in mounts] == [1, 2, 3, 4]
    first = mounts[0]
    assert (first["mount_s"], first["session_s"], first["efficiency"]) == (20.0, 100.0, 0.5)
    assert mounts[3]["open"] and mounts[3]["efficiency"] is None
    page, nxt = await admin.mounts(MountFilter(limit=2))
    assert [m["id"] for m in page] == [1, 2] and nxt == 2
    newest, nxt = await admin.mounts(MountFilter(limit=2, newest=True))
    assert [m["id"] for m in newest] == [3, 4] and nxt is None
    recent, _ = await admin.mounts(MountFilter(since=at(500)))
    assert [m["id"] for m in recent] == [3, 4]
    on_d1, _ = await admin.mounts(MountFilter(drive="d1", until=at(1500)))
    assert [m["id"] for m in on_d1] == [2]


async def test_efficiency_report(history: async_sessionmaker[Any]) -> None:
    report = await ReportStore(history).efficiency(at(-10), at(86400 - 10), bins=24)
    total = report["total"]
    assert total["mounts"] == 4 and total["tapes"] == 3 and total["remounts"] == 1
    assert total["remounts_per_day"] == 1.0
    assert (total["files"], total["bytes"]) == (4, 600)
    # Time-weighted over closed mounts: (50 + 20 + 30) / (100 + 200 + 100).
    assert total["efficiency"] == 0.25
    drives = {d["drive"]: d for d in report["drives"]}
    assert drives["d0"]["mounts"] == 2 and drives["d0"]["remounts"] == 1
    assert drives["d0"]["efficiency"] == 0.4
    assert drives["d1"]["efficiency"] == 0.1
    tapes = {t["volume"]: t for t in report["tapes"]}
    assert report["tapes"][0]["volume"] == "VOL1"  # most mounted first
    assert tapes["VOL1"]["files_per_mount"] == 1.5
    queues = {q["queue"]: q for q in report["queues"]}
    assert (queues["atlas"]["mounts"], queues["atlas"]["files"]) == (3, 3)
    assert queues["atlas"]["bytes"] == 400
    assert (queues["cms"]["mounts"], queues["cms"]["files"]) == (1, 1)
    line = report["timeline"]
    assert sum(line["mounts"]) == 4 and sum(line["files"]) == 4 and sum(line["bytes"]) == 600
    assert line["start"] == at(0).isoformat()  # from the first mount, not the window start


async def test_queues_set_and_list(history: async_sessionmaker[Any]) -> None:
    admin = AdminStore(history)
    names = [q["name"] for q in await admin.queues(always="default")]
    assert names == ["cms", "default"]  # open requests, and the default queue
    q = await admin.set_queue("atlas", priority=5, max_drives=2, paused=True)
    assert (q["priority"], q["max_drives"], q["paused"], q["configured"]) == (5, 2, True, True)
    q = await admin.set_queue("atlas", paused=False)  # other fields stay
    assert (q["priority"], q["max_drives"], q["paused"]) == (5, 2, False)
    q = await admin.set_queue("atlas", max_drives=None)
    assert q["max_drives"] is None
    cms = next(q for q in await admin.queues() if q["name"] == "cms")
    assert (cms["queued"], cms["queued_bytes"], cms["configured"]) == (1, 7, False)


async def test_drives_and_tapes(history: async_sessionmaker[Any]) -> None:
    admin = AdminStore(history)
    await admin.set_drive_enabled("d1", False)
    drives = {d["name"]: d for d in await admin.drives()}
    assert drives["d1"]["state"] == "disabled" and drives["d1"]["volume"] == "VOL3"
    with pytest.raises(NotFound):
        await admin.set_drive_enabled("nope", True)
    tapes, nxt = await admin.tapes(limit=2)
    assert [t["volume"] for t in tapes] == ["VOL1", "VOL2"] and nxt == "VOL2"
    rest, nxt = await admin.tapes(limit=10, after="VOL2")
    assert [t["volume"] for t in rest] == ["VOL3", "VOL4"] and nxt is None
    assert rest[0]["drive"] == "d1"
    assert (rest[1]["mounts"], rest[1]["pending"], rest[1]["pending_bytes"]) == (0, 1, 7)
    # The volumes with queued recalls named by the planner's index: the same pages.
    queued = {"VOL4": (1, 7)}
    assert await admin.tapes(limit=2, queued=queued) == (tapes, "VOL2")
    assert await admin.tapes(limit=10, after="VOL2", queued=queued) == (rest, None)
    # The index is the truth for queued recalls: none there, VOL4 (no mounts) is not shown.
    assert [t["volume"] for t in (await admin.tapes(limit=10, queued={}))[0]] == [
        "VOL1", "VOL2", "VOL3",
    ]  # fmt: skip
    tape = await admin.tape("VOL1")
    assert tape["mounts"] == 2 and [m["id"] for m in tape["history"]] == [1, 3]
    assert tape["requests"]["done"] == {"count": 3, "bytes": 500}
    with pytest.raises(NotFound):
        await admin.tape("VOL9")


async def test_database_gauges(sessions: async_sessionmaker[Any]) -> None:
    now = datetime.now(UTC)
    async with sessions.begin() as s:
        s.add_all(
            [Mount(drive="d0", volume="VA", purpose="recall", requested_at=now - timedelta(hours=h))
             for h in (1, 2, 3)]
            + [Mount(drive="d0", volume="VB", purpose="recall", requested_at=now),
               Mount(drive="d0", volume="VC", purpose="recall", requested_at=now - DAY2),
               QueueRow(name="atlas", priority=0, paused=True),
               Request(kind="recall", state="queued", key="1", queue="cms",
                       created_at=now - timedelta(seconds=100))]
        )  # fmt: skip
    metrics = Metrics()
    gauges = GaugeStore(sessions, Counts(sessions))
    scheduler = SchedulerSettings(default_queue="default", mount_budget_per_day=2)
    seen: set[str] = set()
    await refresh(gauges, metrics, scheduler, seen)

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("tssd_tapes_mounted_24h") == 2  # VC was mounted two days ago
    assert sample("tssd_tape_mounts_24h_max") == 3
    assert sample("tssd_tapes_over_mount_budget") == 1
    assert sample("tssd_queue_paused", queue="atlas") == 1
    assert sample("tssd_queue_paused", queue="default") == 0
    assert 100 <= (sample("tssd_queue_oldest_queued_seconds", queue="cms") or 0) < 200
    async with sessions.begin() as s:
        await s.execute(update(Request).values(state="done"))
    await refresh(gauges, metrics, scheduler, seen)
    assert sample("tssd_queue_oldest_queued_seconds", queue="cms") == 0

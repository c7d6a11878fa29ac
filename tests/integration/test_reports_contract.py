"""The operator's reads and settings (tssd/ports/reports.py), one suite on every
implementation: SQLite, PostgreSQL (skipped without a server, a failure under
``CI=true``) and memory (tssd/db/memory_reports.py).

Each test builds its history through the interfaces the daemon writes it with (the
request store's submit and transitions, the drive manager's mount book), then reads it
through the ports, so every implementation is asked the same questions of the same past.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from store_contract import STORES, activate, end, open_store, recall, submit

from tssd.clock import utcnow
from tssd.config.queues import load_queues
from tssd.db.admin import AdminStore
from tssd.db.gauges import GaugeStore
from tssd.db.glance import GlanceStore
from tssd.db.interface import MountBook, RequestStoreInterface
from tssd.db.memory import MemoryStore
from tssd.db.memory_mounts import MemoryMounts
from tssd.db.memory_reports import (
    MemoryAdmin,
    MemoryEfficiency,
    MemoryGauges,
    MemoryGlance,
    MemoryReads,
)
from tssd.db.mounts import MountStore
from tssd.db.reports import ReportStore
from tssd.db.store import RequestStore
from tssd.domain import Drive, Kind, Mount, State
from tssd.errors import NotFound
from tssd.ports.reports import UNSET, Admin, Efficiency, Gauges, Glance, MountFilter

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Info:
    """A drive as the backend reports it."""

    name: str
    volume: str | None = None


@dataclass
class Library:
    """One implementation: the writers of the history and the four ports reading it."""

    store: RequestStoreInterface
    book: MountBook
    glance: Glance
    admin: Admin
    reports: Efficiency
    gauges: Gauges
    made: int = 0

    async def mount(
        self, drive: str, volume: str, *, files: int = 0, nbytes: int = 0, close: bool = True
    ) -> int:
        """A mount of *volume* in *drive*, ready at once; closed with its counters."""
        mount_id = await self.book.open_mount(drive, volume, Kind.RECALL)
        await self.book.mounted(drive, volume, mount_id)
        if close:
            await self.book.close_mount(
                drive, mount_id, utcnow(), files=files, nbytes=nbytes, transfer_s=0.0
            )
        return mount_id

    async def recalls(self, volume: str, *sizes: int, queue: str = "default") -> list[int]:
        """Queued recalls located on *volume*, one per size."""
        specs = []
        for size in sizes:
            self.made += 1
            specs.append(recall(f"{self.made:08X}", size=size, queue=queue))
        ids = await submit(self.store, *specs)
        await self.store.set_locations({i: (volume, n) for n, i in enumerate(ids)})
        return ids

    async def read(self, ids: Sequence[int], drive: str) -> None:
        """Claim *ids* on *drive* and finish them (read during its mount)."""
        await activate(self.store, ids, drive=drive)
        for request_id in ids:
            assert await self.store.finish(request_id, "read")


@pytest.fixture(params=STORES)
async def lib(request: pytest.FixtureRequest) -> AsyncIterator[Library]:
    async with open_store(request) as store:
        if isinstance(store, MemoryStore):
            reads = MemoryReads(store, MemoryMounts())
            library = Library(
                store, reads.book, MemoryGlance(reads), MemoryAdmin(reads),
                MemoryEfficiency(reads), MemoryGauges(reads),
            )  # fmt: skip
        else:
            assert isinstance(store, RequestStore)
            sessions = store.sessions
            library = Library(
                store, MountStore(sessions), GlanceStore(sessions),
                AdminStore(sessions, store.tally), ReportStore(sessions),
                GaugeStore(sessions, store.tally),
            )  # fmt: skip
        await library.book.reset_drives([Info("d0"), Info("d1"), Info("d2")], None)
        yield library


# -- glance ---------------------------------------------------------------------------------


async def test_glance_drives_are_domain_records_by_name(lib: Library) -> None:
    await lib.mount("d1", "VOL1", close=False)
    drives = await lib.glance.drives()
    assert all(type(d) is Drive for d in drives)
    assert [(d.name, d.enabled, d.state, d.volume) for d in drives] == [
        ("d0", True, "empty", None),
        ("d1", True, "mounted", "VOL1"),
        ("d2", True, "empty", None),
    ]
    assert all(d.updated_at.tzinfo is not None for d in drives)


async def test_glance_mounts_newest_first_and_open_ones_by_drive(lib: Library) -> None:
    first = await lib.mount("d0", "VOL1", files=2, nbytes=20)
    second = await lib.mount("d0", "VOL2")
    held = await lib.mount("d1", "VOL3", close=False)
    newest = await lib.glance.last_mounts(2)
    assert all(type(m) is Mount for m in newest)
    assert [m.id for m in newest] == [held, second]
    everything = await lib.glance.last_mounts(10)
    assert [m.id for m in everything] == [held, second, first]
    done = everything[-1]
    assert (done.drive, done.volume, done.purpose, done.files, done.bytes) == (
        "d0", "VOL1", "recall", 2, 20
    )  # fmt: skip
    assert done.ready_at is not None and done.dismounted_at is not None
    opened = await lib.glance.open_mounts()
    assert list(opened) == ["d1"] and opened["d1"].id == held


async def test_glance_mounts_since_is_bounded_and_says_so(lib: Library) -> None:
    ids = [await lib.mount("d0", f"VOL{i}") for i in range(4)]
    rows, truncated = await lib.glance.mounts_since(utcnow() - HOUR, 10)
    assert [m.id for m in rows] == ids and not truncated  # oldest first
    rows, truncated = await lib.glance.mounts_since(utcnow() - HOUR, 3)
    assert [m.id for m in rows] == ids[1:] and truncated  # the newest three
    later, _ = await lib.glance.mounts_since(utcnow() + HOUR, 10)
    assert later == []


async def test_glance_active_per_drive(lib: Library) -> None:
    ids = await lib.recalls("VOL1", 10, 20, 30)
    await activate(lib.store, ids[:2], drive="d0")
    await activate(lib.store, ids[2:], drive="d1")
    assert await lib.glance.active_per_drive() == {"d0": (2, 30), "d1": (1, 30)}
    assert await lib.store.finish(ids[2], "read")
    assert await lib.glance.active_per_drive() == {"d0": (2, 30)}


# -- admin: queues --------------------------------------------------------------------------


async def test_queues_list_configured_open_and_always(lib: Library) -> None:
    await lib.recalls("VOL1", 5, 7, queue="cms")
    await lib.admin.set_queue("atlas", priority=3)
    queues = {q["name"]: q for q in await lib.admin.queues(always="default")}
    assert list(queues) == ["atlas", "cms", "default"]
    cms = queues["cms"]
    assert (cms["configured"], cms["queued"], cms["queued_bytes"], cms["active"]) == (
        False, 2, 12, 0
    )  # fmt: skip
    assert cms["oldest_queued_at"] is not None
    assert datetime.fromisoformat(cms["oldest_queued_at"]) <= utcnow()
    assert (queues["atlas"]["configured"], queues["atlas"]["priority"]) == (True, 3)
    assert queues["default"]["configured"] is False
    assert [q["name"] for q in await lib.admin.queues()] == ["atlas", "cms"]


async def test_set_queue_changes_only_the_given_fields(lib: Library) -> None:
    q = await lib.admin.set_queue("atlas", priority=5, max_drives=2, paused=True)
    assert (q["priority"], q["max_drives"], q["paused"], q["configured"]) == (5, 2, True, True)
    q = await lib.admin.set_queue("atlas", paused=False, latency_target_s=60.0)
    assert (q["priority"], q["max_drives"], q["paused"], q["latency_target_s"]) == (
        5, 2, False, 60.0
    )  # fmt: skip
    q = await lib.admin.set_queue("atlas", max_drives=None, latency_target_s=UNSET)
    assert (q["max_drives"], q["latency_target_s"]) == (None, 60.0)


async def test_seed_queues_applies_the_keys_a_table_gives(lib: Library) -> None:
    await lib.admin.set_queue("atlas", priority=9, max_drives=3, latency_target_s=60.0)
    tables = [{"name": "atlas", "latency_target_s": "2h"}, {"name": "new", "priority": 4}]
    await lib.admin.seed_queues(load_queues(tables))
    listed = {q["name"]: q for q in await lib.admin.queues()}
    atlas, new = listed["atlas"], listed["new"]
    assert (atlas["priority"], atlas["max_drives"], atlas["latency_target_s"]) == (9, 3, 7200.0)
    assert (new["configured"], new["priority"], new["latency_target_s"]) == (True, 4, None)


# -- admin: drives, tapes, mounts -----------------------------------------------------------


async def test_drives_with_their_day_of_mounts_and_enabling(lib: Library) -> None:
    await lib.mount("d0", "VOL1")
    await lib.mount("d0", "VOL2", close=False)
    drives = {d["name"]: d for d in await lib.admin.drives()}
    assert list(drives) == ["d0", "d1", "d2"]
    d0 = drives["d0"]
    assert (d0["enabled"], d0["state"], d0["volume"], d0["mounts_24h"]) == (
        True, "mounted", "VOL2", 2
    )  # fmt: skip
    assert d0["last_mount_at"] is not None and d0["updated_at"] is not None
    assert (drives["d1"]["mounts_24h"], drives["d1"]["last_mount_at"]) == (0, None)
    await lib.admin.set_drive_enabled("d1", False)
    d1 = next(d for d in await lib.admin.drives() if d["name"] == "d1")
    assert (d1["enabled"], d1["state"]) == (False, "disabled")
    assert [d.enabled for d in await lib.glance.drives()] == [True, False, True]
    await lib.admin.set_drive_enabled("d1", True)
    assert all(d["enabled"] for d in await lib.admin.drives())
    with pytest.raises(NotFound):
        await lib.admin.set_drive_enabled("nope", False)


async def test_tapes_page_known_tapes_and_tapes_with_recalls(lib: Library) -> None:
    await lib.mount("d0", "VOL1")
    await lib.mount("d0", "VOL1")
    await lib.mount("d1", "VOL3", close=False)
    await lib.recalls("VOL2", 4)
    await lib.recalls("VOL4", 3, 4)
    page, nxt = await lib.admin.tapes(limit=2)
    assert [t["volume"] for t in page] == ["VOL1", "VOL2"] and nxt == "VOL2"
    vol1 = page[0]
    assert (vol1["mounts"], vol1["mounts_24h"], vol1["state"], vol1["pending"]) == (2, 2, "ok", 0)
    assert vol1["last_mounted_at"] is not None and vol1["drive"] is None
    rest, nxt = await lib.admin.tapes(limit=10, after="VOL2")
    assert [t["volume"] for t in rest] == ["VOL3", "VOL4"] and nxt is None
    assert rest[0]["drive"] == "d1"
    assert (rest[1]["mounts"], rest[1]["pending"], rest[1]["pending_bytes"]) == (0, 2, 7)
    # The caller's index of queued recalls: the same pages from it.
    queued = {"VOL2": (1, 4), "VOL4": (2, 7)}
    assert await lib.admin.tapes(limit=2, queued=queued) == (page, "VOL2")
    assert await lib.admin.tapes(limit=10, after="VOL2", queued=queued) == (rest, None)
    # The index is the truth for queued recalls: without them VOL2 and VOL4 are not shown.
    listed, _ = await lib.admin.tapes(limit=10, queued={})
    assert [t["volume"] for t in listed] == ["VOL1", "VOL3"]


async def test_tapes_count_active_recalls_besides_the_index(lib: Library) -> None:
    ids = await lib.recalls("VOL5", 10, 20)
    await activate(lib.store, ids[:1], drive="d0")
    [tape], _ = await lib.admin.tapes(limit=10, queued={"VOL5": (1, 20)})
    assert (tape["volume"], tape["pending"], tape["pending_bytes"]) == ("VOL5", 2, 30)


async def test_one_tape_with_its_requests_and_history(lib: Library) -> None:
    first = await lib.mount("d0", "VOL1")
    ids = await lib.recalls("VOL1", 100, 200, 5)
    await lib.read(ids[:2], "d0")
    second = await lib.mount("d0", "VOL1", close=False)
    tape = await lib.admin.tape("VOL1")
    assert (tape["volume"], tape["mounts"], tape["drive"]) == ("VOL1", 2, "d0")
    assert [m["id"] for m in tape["history"]] == [first, second]
    assert tape["requests"] == {
        "done": {"count": 2, "bytes": 300},
        "queued": {"count": 1, "bytes": 5},
    }
    assert (tape["pending"], tape["pending_bytes"], tape["mounts_24h"]) == (1, 5, 2)
    short = await lib.admin.tape("VOL1", history=1)
    assert [m["id"] for m in short["history"]] == [second]
    # Known by its requests alone.
    await lib.recalls("VOL7", 1)
    assert (await lib.admin.tape("VOL7"))["mounts"] == 0
    with pytest.raises(NotFound):
        await lib.admin.tape("VOL9")


async def test_mount_history_filters_and_pages(lib: Library) -> None:
    ids = [await lib.mount(d, v) for d, v in (("d0", "VOL1"), ("d1", "VOL2"), ("d0", "VOL3"))]
    held = await lib.mount("d1", "VOL4", close=False)
    ids.append(held)
    mounts, nxt = await lib.admin.mounts(MountFilter())
    assert [m["id"] for m in mounts] == ids and nxt is None
    assert mounts[-1]["open"] and mounts[-1]["efficiency"] is None
    assert not mounts[0]["open"] and mounts[0]["session_s"] is not None
    page, nxt = await lib.admin.mounts(MountFilter(limit=2))
    assert [m["id"] for m in page] == ids[:2] and nxt == ids[1]
    rest, nxt = await lib.admin.mounts(MountFilter(limit=2, after=ids[1]))
    assert [m["id"] for m in rest] == ids[2:] and nxt is None
    newest, nxt = await lib.admin.mounts(MountFilter(limit=2, newest=True))
    assert [m["id"] for m in newest] == ids[2:] and nxt is None
    on_d0, _ = await lib.admin.mounts(MountFilter(drive="d0"))
    assert [m["id"] for m in on_d0] == [ids[0], ids[2]]
    of_vol2, _ = await lib.admin.mounts(MountFilter(volume="VOL2"))
    assert [m["id"] for m in of_vol2] == [ids[1]]
    # A mount still open at `since` belongs to the window too.
    later, _ = await lib.admin.mounts(MountFilter(since=utcnow() + HOUR))
    assert [m["id"] for m in later] == [held]
    before, _ = await lib.admin.mounts(MountFilter(until=utcnow() - HOUR))
    assert before == []


# -- efficiency -----------------------------------------------------------------------------


async def test_efficiency_report_per_drive_tape_and_queue(lib: Library) -> None:
    since = utcnow() - timedelta(seconds=1)
    atlas = await lib.recalls("VOL1", 100, 200, queue="atlas")
    cms = await lib.recalls("VOL1", 50, queue="cms")
    first = await lib.book.open_mount("d0", "VOL1", Kind.RECALL)
    await lib.book.mounted("d0", "VOL1", first)
    await lib.read(atlas + cms, "d0")
    await asyncio.sleep(0.01)  # the mount closes after its reads finished
    await lib.book.close_mount("d0", first, utcnow(), files=3, nbytes=350, transfer_s=0.001)
    await lib.mount("d1", "VOL2", files=1, nbytes=10)
    await lib.mount("d0", "VOL1", files=0, nbytes=0)  # a remount
    until = utcnow() + timedelta(seconds=1)
    report = await lib.reports.efficiency(since, until, bins=4)
    total = report["total"]
    assert (total["mounts"], total["tapes"], total["remounts"]) == (3, 2, 1)
    assert (total["files"], total["bytes"]) == (4, 360)
    assert total["efficiency"] is not None and 0 <= total["efficiency"] <= 1
    drives = {d["drive"]: d for d in report["drives"]}
    assert (drives["d0"]["mounts"], drives["d0"]["remounts"], drives["d1"]["mounts"]) == (2, 1, 1)
    assert report["tapes"][0]["volume"] == "VOL1"  # most mounted first
    queues = {q["queue"]: q for q in report["queues"]}
    assert (queues["atlas"]["mounts"], queues["atlas"]["files"], queues["atlas"]["bytes"]) == (
        1, 2, 300
    )  # fmt: skip
    assert (queues["cms"]["files"], queues["cms"]["bytes"]) == (1, 50)
    line = report["timeline"]
    assert len(line["mounts"]) == 4
    assert (sum(line["mounts"]), sum(line["files"]), sum(line["bytes"])) == (3, 3, 350)
    assert report["since"] == since.isoformat() and report["until"] == until.isoformat()
    plain = await lib.reports.efficiency(since, until)
    assert "timeline" not in plain and plain["total"] == total
    empty = await lib.reports.efficiency(until, until + HOUR, bins=2)
    assert empty["total"]["mounts"] == 0 and empty["drives"] == []


# -- gauges ---------------------------------------------------------------------------------


async def test_gauges_pauses_mounts_and_queue_ages(lib: Library) -> None:
    for volume in ("VA", "VA", "VA", "VB"):
        await lib.mount("d0", volume)
    await lib.admin.set_queue("atlas", paused=True)
    await lib.admin.set_queue("cms", paused=False)
    paused, mounts = await lib.gauges.pauses_and_mounts(utcnow() - HOUR)
    assert paused == {"atlas": True, "cms": False}
    assert sorted(mounts) == [1, 3]
    _, none = await lib.gauges.pauses_and_mounts(utcnow() + HOUR)
    assert none == []
    assert await lib.gauges.oldest_queued() == {}
    ids = await lib.recalls("VOL1", 1, 2, queue="cms")
    ages = await lib.gauges.oldest_queued()
    assert list(ages) == ["cms"] and ages["cms"] <= utcnow()
    await end(lib.store, ids, State.DONE)
    assert await lib.gauges.oldest_queued() == {}

"""The scheduler's intake on the in-memory store (tssd/db/memory.py): locating recalls,
choosing copies as a set cover, failing files with no copy, and feeding the planner,
without SQL. The same store passes the SQL stores' contract suite
(tests/integration/test_store_contract.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import pytest
from backend_stub import StubBackend

from tssd.backends.base import (
    DriveInfo,
    ReadItem,
    ReadResult,
    Source,
    TapeCopy,
    WriteItem,
    WriteResult,
)
from tssd.clock import RealClock
from tssd.config import SchedulerSettings, Settings
from tssd.db.memory import MemoryStore
from tssd.db.memory_mounts import MemoryMounts
from tssd.domain import Kind, Request, State
from tssd.errors import PermanentBackendError
from tssd.files import CountingSink
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.choose import Chooser
from tssd.scheduler.core import Scheduler
from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.drives import DriveManager
from tssd.scheduler.intake import Intake
from tssd.scheduler.planner import Planner
from tssd.scheduler.policy import get_policy
from tssd.scheduler.reservations import Reservations
from tssd.scheduler.sessions import SessionRunner
from tssd.scheduler.tiers import PriorityTiers
from tssd.submit import parse_submit
from tssd.tape.geometry import LTO9

T0 = datetime(2020, 1, 1, tzinfo=UTC)


class Catalog(StubBackend):
    """The backend's ``locate``: copies by pnfsid (the only call intake makes here)."""

    def __init__(self, copies: dict[str, list[tuple[str, int]]]) -> None:
        self.copies = {
            p: [TapeCopy(p, f"{v}/{n}", v, n, 100, None, None, T0, offset=n * 100) for v, n in cs]
            for p, cs in copies.items()
        }
        self.asked: list[list[str]] = []

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        self.asked.append(list(pnfsids))
        return {p: self.copies[p] for p in pnfsids if p in self.copies}


def retrier() -> Retrier:
    return Retrier(RetryPolicy(0, 0.0, 0.0, 1), Metrics(), RealClock())


async def submit(store: MemoryStore, *pnfsids: str) -> list[int]:
    specs = [parse_submit({"kind": "recall", "pnfsid": p, "path": f"/pool/{p}"}) for p in pnfsids]
    return [row.id for _, row in await store.submit(specs)]


async def test_intake_locates_covers_copies_and_fails_the_lost(memory_store: MemoryStore) -> None:
    # 00A2 has copies on V1 and V2: V1 is needed anyway (00A1), so the cover takes V1.
    catalog = Catalog({"00A1": [("V1", 1)], "00A2": [("V2", 7), ("V1", 2)], "00A3": [("V3", 4)]})
    planner = Planner()
    intake = Intake(memory_store, catalog, retrier(), get_policy("tssd"), planner=planner)
    ids = await submit(memory_store, "00A1", "00A2", "00A3", "00A4")
    assert await intake.locate_recalls(()) == 4
    rows = {i: await memory_store.get(i) for i in ids}
    assert [(rows[i].volume, rows[i].position) for i in ids[:3]] == [
        ("V1", 1), ("V1", 2), ("V3", 4)
    ]  # fmt: skip
    assert rows[ids[3]].state == State.FAILED and rows[ids[3]].error_code == 31
    assert sorted(planner.tapes) == ["V1", "V3"] and len(planner) == 3
    assert await intake.locate_recalls(()) == 0  # nothing left to locate
    assert catalog.asked == [["00A1", "00A2", "00A3", "00A4"]]


async def test_intake_asks_for_unlocated_recalls_only_when_some_may_have_come(
    memory_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a pass that found fewer than its limit, the query for unlocated recalls is
    not run again until the scheduler tells of new or requeued work (fifo passes once
    per file)."""
    catalog = Catalog({"00B1": [("V1", 1)], "00B2": [("V2", 2)]})
    intake = Intake(memory_store, catalog, retrier(), get_policy("fifo"))
    asked: list[int] = []
    unlocated = memory_store.scheduling.unlocated

    async def counted(limit: int) -> list[Request]:
        asked.append(limit)
        return await unlocated(limit)

    monkeypatch.setattr(memory_store.scheduling, "unlocated", counted)
    await submit(memory_store, "00B1")
    assert await intake.locate_recalls(()) == 1
    assert await intake.locate_recalls(()) == 0
    assert len(asked) == 1  # drained: not asked again
    [new] = await submit(memory_store, "00B2")
    intake.expect_recalls()  # the scheduler heard of the submission
    assert await intake.locate_recalls(()) == 1
    assert (await memory_store.get(new)).volume == "V2"
    assert len(asked) == 2


class Library(Catalog):
    """A two-drive library in memory: the backend calls a recall session makes."""

    name = "memory-library"

    def __init__(self, copies: dict[str, list[tuple[str, int]]]) -> None:
        super().__init__(copies)
        self.loaded: dict[str, str | None] = {"d1": None, "d2": None}
        self.reads: list[tuple[str, str]] = []

    async def drives(self) -> list[DriveInfo]:
        return [DriveInfo(name, volume) for name, volume in self.loaded.items()]

    async def mount(self, drive: str, volume: str) -> None:
        assert volume not in self.loaded.values(), "one cartridge in one drive"
        self.loaded[drive] = volume

    async def dismount(self, drive: str) -> None:
        self.loaded[drive] = None

    async def geometry(self, volume: str) -> None:
        return None  # position order

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        for item in items:
            assert self.loaded[drive] == item.copy.volume
            await item.sink.write(item.copy.pnfsid.encode())
            nbytes, adler = await item.sink.commit()
            self.reads.append((item.copy.volume, item.copy.pnfsid))
            yield ReadResult(item, nbytes, adler)


class Unread:
    """A migration's source that the fake libraries never read."""

    size = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        nothing: tuple[bytes, ...] = ()
        for chunk in nothing:
            yield chunk


def unread(request: Request) -> Source:
    return Unread()


def whole_scheduler(
    store: MemoryStore, library: Library, settings: SchedulerSettings | None = None
) -> tuple[Scheduler, MemoryMounts, Reservations]:
    """The whole scheduler (chooser, drives, sessions, intake) on *store* and *library*;
    its mount book and reservations."""
    settings = settings or Settings().scheduler
    clock, metrics, policy, planner = RealClock(), Metrics(), get_policy("tssd"), Planner()
    mounts = MemoryMounts()
    drives = DriveManager(library, mounts, retrier(), metrics, clock)
    sessions = DriveSessions(drives.drives, clock)
    chooser = Chooser(
        settings, store.scheduling, store.queue_settings, drives, LTO9, clock, planner=planner,
        drive_sessions=sessions,
    )  # fmt: skip
    runner = SessionRunner(
        store, library, drives, retrier(), metrics,
        tiers=PriorityTiers(sessions, planner), sink_for=lambda request: CountingSink(),
        source_for=unread, chunk=100, policy=policy, rao="off",
    )  # fmt: skip
    intake = Intake(store, library, retrier(), policy, planner=planner, now=clock.now)
    scheduler = Scheduler(
        settings, store, drives, intake, runner, metrics, policy,
        chooser=chooser, sessions=sessions, work=store.work,
    )  # fmt: skip
    return scheduler, mounts, sessions.reservations


async def test_the_scheduler_reads_every_tape_once_on_the_memory_store(
    memory_store: MemoryStore,
) -> None:
    """The whole scheduler (chooser, drives, sessions, intake) on the in-memory store and
    mount book: five recalls on two tapes, one mount per tape, every file read once."""
    library = Library(
        {"00B1": [("V1", 3)], "00B2": [("V1", 1)], "00B3": [("V2", 2)], "00B4": [("V1", 2)],
         "00B5": [("V2", 1)]}
    )  # fmt: skip
    scheduler, mounts, _ = whole_scheduler(memory_store, library)
    ids = await submit(memory_store, "00B1", "00B2", "00B3", "00B4", "00B5")
    await scheduler.start()
    for _ in range(50):
        await scheduler.schedule_once()
        await asyncio.sleep(0.01)  # the sessions the pass started run meanwhile
        if [(await memory_store.get(i)).state for i in ids] == [State.DONE] * 5:
            break
    await scheduler.stop(1.0)
    assert [(await memory_store.get(i)).state for i in ids] == [State.DONE] * 5
    assert sorted(library.reads) == [
        ("V1", "00B1"), ("V1", "00B2"), ("V1", "00B4"), ("V2", "00B3"), ("V2", "00B5")
    ]  # fmt: skip
    v1 = [p for v, p in library.reads if v == "V1"]
    assert v1 == ["00B2", "00B4", "00B1"]  # position order on the tape
    assert sorted(m.volume for m in mounts.mounts) == ["V1", "V2"]
    # The seams are enums, not strings: a session's purpose, what a tape was mounted for.
    assert [type(purpose) for purpose in scheduler.sessions_started] == [Kind]
    assert {type(m.purpose) for m in mounts.mounts} == {Kind}


class StepClock(RealClock):
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.at = 1000.0

    def now(self) -> float:
        return self.at


async def test_mount_counters_reach_the_row_when_a_session_ends() -> None:
    """A running mount's counters are written at each session's end (tssctl mounts shows
    them then), and the dismount writes the final ones."""
    mounts, clock = MemoryMounts(), StepClock()
    drives = DriveManager(Library({}), mounts, retrier(), Metrics(), clock)
    await drives.load()
    drive = drives.drives["d1"]
    await drives.ensure_mounted(drive, "V1", Kind.RECALL)
    drives.account(drive, 100, 1.0, 0.0)
    await drives.flush_stats(drive)
    assert mounts.mounts[0].files == 1
    drives.account(drive, 100, 1.0, 0.0)
    await drives.dismount(drive)
    assert (mounts.mounts[0].files, mounts.mounts[0].nbytes) == (2, 200)


class HeldLibrary(Library):
    """One drive holding tape R at the start; reads and writes wait for *go*."""

    def __init__(self, copies: dict[str, list[tuple[str, int]]]) -> None:
        super().__init__(copies)
        self.loaded = {"d1": "R"}
        self.go = asyncio.Event()
        self.busy = asyncio.Event()

    async def max_object_size(self) -> None:
        return None

    async def writable_volume(self, storage_class: str, size: int) -> str:
        return "V"

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        self.busy.set()
        await self.go.wait()
        async for result in super().read(drive, items):
            yield result

    async def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        self.busy.set()
        await self.go.wait()
        for item in items:
            copy = TapeCopy(item.pnfsid, f"V/{item.pnfsid}", "V", 1, 100, None, None, T0)
            yield WriteResult(item, copy)


@pytest.mark.parametrize("kind", ["recall", "migrate"])
async def test_a_session_frees_the_tape_it_unloads_at_once_and_once(
    memory_store: MemoryStore, kind: str
) -> None:
    """A session on a drive holding another tape (R) unloads R and frees it at once, so
    another drive may take R while the session reads or writes; and the session's end
    does not free R again (that would drop the reservation of the session now on R).
    Recall sessions did the first since issue 18's third trickle round; migrations held
    R to their end."""
    library = HeldLibrary({"00C1": [("X", 1)]})
    settings = dataclasses.replace(Settings().scheduler, migrate_max_age_s=0.0)
    scheduler, _, reservations = whole_scheduler(memory_store, library, settings)
    if kind == "recall":
        [request] = await submit(memory_store, "00C1")
    else:
        body = {
            "kind": "migrate", "pnfsid": "00C1", "path": "/pool/00C1", "storage_class": "a:b",
            "size": 100,
        }  # fmt: skip
        [(_, row)] = await memory_store.submit([parse_submit(body)])
        request = row.id
    await scheduler.start()
    for _ in range(50):
        await scheduler.schedule_once()
        await asyncio.sleep(0.01)
        if library.busy.is_set():
            break
    assert library.loaded["d1"] != "R"  # unloaded for the session's own tape
    assert not reservations.volume_busy("R")  # and free while the session runs
    reservations.hold_volume("R")  # as another drive's session for R would
    library.go.set()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if (await memory_store.get(request)).state == State.DONE:
            break
    assert (await memory_store.get(request)).state == State.DONE
    await scheduler.stop(1.0)
    assert reservations.volume_busy("R")  # the session's end left that reservation alone


class StuckLibrary(Library):
    """d1 and d2 hold tapes; d2's unload fails while *stuck*."""

    def __init__(self) -> None:
        super().__init__({})
        self.loaded = {"d1": "A", "d2": "B"}
        self.stuck = True

    async def dismount(self, drive: str) -> None:
        if drive == "d2" and self.stuck:
            raise PermanentBackendError("drive d2: unload refused")
        await super().dismount(drive)


async def test_idle_tapes_unload_after_keep_s_and_at_once_from_a_disabled_drive() -> None:
    """``DriveManager.unload_expired``: a tape idle for less than *keep_s* stays; one in a
    disabled drive goes at once; an unload that fails is retried only after *keep_s*, not
    on every pass; each tape is reserved while it unloads and free after."""
    library, clock, reservations = StuckLibrary(), StepClock(), Reservations()
    drives = DriveManager(library, MemoryMounts(), retrier(), Metrics(), clock)
    await drives.load()
    await drives.unload_expired(60.0, reservations)
    assert library.loaded == {"d1": "A", "d2": "B"}  # idle for 0 s
    drives.set_enabled("d2", False)
    await drives.unload_expired(60.0, reservations)  # d2 at once: refused
    assert library.loaded == {"d1": "A", "d2": "B"}
    library.stuck = False
    clock.at += 30
    await drives.unload_expired(60.0, reservations)
    assert library.loaded["d2"] == "B"  # a failed unload waits keep_s like an idle tape
    clock.at += 31
    await drives.unload_expired(60.0, reservations)
    assert library.loaded == {"d1": None, "d2": None}
    assert not reservations.volume_busy("A") and not reservations.volume_busy("B")
    assert not any(d.busy for d in drives.drives.values())


async def test_a_migration_whose_tape_is_busy_elsewhere_leaves_that_reservation_alone(
    memory_store: MemoryStore,
) -> None:
    """The tape a migration would fill (V) is in another session: the migration gives
    up for now, and its end must not release V, which it never held (once it did, and
    the next pass wrote to V under the other session)."""
    library = HeldLibrary({})
    settings = dataclasses.replace(Settings().scheduler, migrate_max_age_s=0.0)
    scheduler, _, reservations = whole_scheduler(memory_store, library, settings)
    body = {
        "kind": "migrate", "pnfsid": "00C1", "path": "/pool/00C1", "storage_class": "a:b",
        "size": 100,
    }  # fmt: skip
    [(_, row)] = await memory_store.submit([parse_submit(body)])
    reservations.hold_volume("V")  # as another drive's session on V would
    await scheduler.start()
    for _ in range(20):
        await scheduler.schedule_once()
        await asyncio.sleep(0.01)
    await scheduler.stop(1.0)
    assert scheduler.sessions_started[Kind.MIGRATE] >= 1
    assert reservations.volume_busy("V") and not library.busy.is_set()
    assert (await memory_store.get(row.id)).state == State.QUEUED

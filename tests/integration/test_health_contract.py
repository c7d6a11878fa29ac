"""The health book's contract (tssd/ports/health.py) on SQLite, PostgreSQL and memory.

A disabled drive is seen where the scheduler reads it at its next start (the mounts'
``reset_drives``); a suspect tape where the tape rows are kept. The counting that leads
to these verdicts: tests/unit/test_reliab_guards.py and test_faults_health.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import select
from store_contract import STORES, open_store

from tssd.backends.base import DriveInfo
from tssd.db.health import SqlHealth
from tssd.db.memory import MemoryStore
from tssd.db.memory_health import MemoryHealth
from tssd.db.memory_mounts import MemoryMounts
from tssd.db.models import Tape
from tssd.db.mounts import MountStore
from tssd.db.store import RequestStore
from tssd.domain import Kind
from tssd.ports.health import HealthBook


@dataclass
class Bench:
    book: HealthBook
    mounts: MountStore | MemoryMounts
    store: RequestStore | None = None

    async def enabled(self) -> dict[str, bool]:
        """Whether each drive is in service, as the scheduler's next start reads it."""
        return await self.mounts.reset_drives([], None)

    async def tapes(self) -> dict[str, str]:
        """The tapes that are not in order, with their state."""
        if isinstance(self.book, MemoryHealth):
            return dict(self.book.tapes)
        assert self.store is not None
        stmt = select(Tape.volume, Tape.state).where(Tape.state != "ok")
        async with self.store.sessions() as session:
            return dict((await session.execute(stmt)).all())


@pytest.fixture(params=STORES)
async def bench(request: pytest.FixtureRequest) -> AsyncIterator[Bench]:
    async with open_store(request) as store:
        if isinstance(store, MemoryStore):
            mounts = MemoryMounts()
            yield Bench(MemoryHealth(mounts), mounts)
            return
        assert isinstance(store, RequestStore)
        yield Bench(SqlHealth(store.sessions), MountStore(store.sessions), store)


async def test_the_book_has_every_member_of_the_port(bench: Bench) -> None:
    assert isinstance(bench.book, HealthBook)


async def test_a_disabled_drive_stays_out_of_service(bench: Bench) -> None:
    await bench.mounts.reset_drives([DriveInfo("d0", None), DriveInfo("d1", "V1")], None)
    await bench.book.disable_drive("d0")
    await bench.book.disable_drive("d0")  # again: no change
    assert await bench.enabled() == {"d0": False, "d1": True}


async def test_disabling_an_unknown_drive_changes_nothing(bench: Bench) -> None:
    await bench.mounts.reset_drives([DriveInfo("d0", None)], None)
    await bench.book.disable_drive("nowhere")
    assert await bench.enabled() == {"d0": True}


async def test_a_suspect_tape_is_recorded_known_or_not(bench: Bench) -> None:
    mount_id = await bench.mounts.open_mount("d0", "T1", Kind.RECALL)
    await bench.mounts.mounted("d0", "T1", mount_id)  # T1 is known: it was mounted
    assert await bench.tapes() == {}
    await bench.book.mark_tape_suspect("T1")
    await bench.book.mark_tape_suspect("T1")  # again: still one tape, suspect
    await bench.book.mark_tape_suspect("T2")
    assert await bench.tapes() == {"T1": "suspect", "T2": "suspect"}

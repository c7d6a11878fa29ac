"""Migration is idempotent in the simulated library even when two writes of one file race
(a retried put and its original, or two instances): one copy is recorded, both get it."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.base import WriteItem
from tssd.backends.sim import SimLibrary
from tssd.clock import RealClock
from tssd.config import SimSettings
from tssd.db.models import SimObject
from tssd.db.sim_catalog import SimCatalogTables
from tssd.files import FileSource

SC = "atlas:tape"


async def test_racing_writes_of_one_file_record_one_copy(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    settings = dataclasses.replace(SimSettings(drives=2, tapes=3))
    lib = SimLibrary(
        settings, SimCatalogTables(sessions), RealClock(), tmp_path / "sim", time_scale=0.0
    )
    await lib.open()
    src = tmp_path / "f"
    src.write_bytes(os.urandom(300_000))
    size = src.stat().st_size
    v0 = await lib.writable_volume(SC, size)
    await lib.mount("drive0", v0)
    v1 = next(t for t in (f"SIM00{i}L9" for i in range(3)) if t != v0)
    await lib.mount("drive1", v1)

    async def put(drive: str) -> Any:
        # No checksum given: the early lookup cannot match, only the one under the lock.
        item = WriteItem("00AB", SC, FileSource(src, size))
        (result,) = [r async for r in lib.write(drive, [item])]
        return result

    first, second = await asyncio.gather(put("drive0"), put("drive1"))
    assert first.error is None and second.error is None
    assert first.copy == second.copy
    async with sessions() as session:
        objects = list(await session.scalars(select(SimObject)))
    assert [o.bfid for o in objects] == [first.copy.bfid]
    # The loser's bytes were discarded, not left in the library's store.
    stored = [p.name for p in (tmp_path / "sim" / "objects").iterdir()]
    assert stored == [first.copy.bfid]

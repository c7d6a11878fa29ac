"""The simulated library over the memory catalogs: no database behind the backend.

What the library does with its catalog is tests/unit/test_sim_library.py (on SQLite);
that the memory tables answer as the SQL ones: tests/integration/test_catalog_contract.py.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path

from tssd.backends.base import ReadItem, WriteItem
from tssd.backends.factory import create_backend
from tssd.backends.sim import SimLibrary
from tssd.clock import RealClock
from tssd.config import Settings, SimSettings
from tssd.db.memory_catalogs import MemoryCatalogs
from tssd.files import CountingSink, FileSource

SC = "atlas:tape"


def library(catalogs: MemoryCatalogs, tmp_path: Path) -> SimLibrary:
    settings = Settings(
        home=str(tmp_path), sim=SimSettings(drives=2, tapes=3, time_scale=0.0, tape_capacity=1000)
    )
    backend = create_backend(settings, catalogs, RealClock())
    assert isinstance(backend, SimLibrary)
    return backend


async def test_the_library_stores_locates_and_recalls_on_memory(tmp_path: Path) -> None:
    catalogs = MemoryCatalogs()
    data = b"bytes on a simulated tape"
    source = tmp_path / "P1"
    source.write_bytes(data)
    async with library(catalogs, tmp_path) as lib:
        volume = await lib.writable_volume(SC, len(data))
        await lib.mount("drive0", volume)
        [stored] = [
            r
            async for r in lib.write("drive0", [WriteItem("P1", SC, FileSource(source, len(data)))])
        ]
    assert stored.error is None and stored.copy is not None
    assert (stored.copy.volume, stored.copy.position, stored.copy.offset) == ("SIM000L9", 1, 0)
    tape = await catalogs.sim().tape("SIM000L9")
    assert tape is not None and (tape.storage_class, tape.used, tape.next_seq) == (SC, len(data), 2)

    # A library started again over the same catalogs finds the copy and reads it back.
    async with library(catalogs, tmp_path) as lib:
        assert await lib.locate(["P1", "P2"]) == {"P1": [stored.copy]}
        sink = CountingSink()
        await lib.mount("drive1", stored.copy.volume)
        [recalled] = [r async for r in lib.read("drive1", [ReadItem(stored.copy, sink)])]
    assert recalled.error is None and recalled.nbytes == len(data)
    assert recalled.adler32 == f"{zlib.adler32(data):08x}" and sink.committed


async def test_an_imported_catalog_recalls_filler_on_memory(tmp_path: Path) -> None:
    catalogs = MemoryCatalogs()
    csv = "pnfsid,volume,seq,size,storage_class,written_at\n00A1,SIM001L9,1,300,,2024-01-01\n"
    async with library(catalogs, tmp_path) as lib:
        summary = await lib.import_catalog(io.StringIO(csv), replace=False)
        assert summary["objects"] == 1
        [copy] = (await lib.locate(["00A1"]))["00A1"]
        await lib.mount("drive0", copy.volume)
        [recalled] = [r async for r in lib.read("drive0", [ReadItem(copy, CountingSink())])]
        exported = io.StringIO()
        await lib.export_catalog(exported)
    assert recalled.error is None and recalled.nbytes == 300
    assert exported.getvalue() == csv.replace("2024-01-01", "2024-01-01T00:00:00+00:00")

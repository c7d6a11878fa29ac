"""Simulated-library behaviour beyond the backend contract: catalog set-up, restarts,
corrupt or lost media, filler data, tape filling, profiles and the factory."""

from __future__ import annotations

import dataclasses
import zlib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.base import ReadItem, ReadResult, TapeCopy, WriteItem, WriteResult
from tssd.backends.factory import create_backend
from tssd.backends.sim import SimLibrary, get_profile
from tssd.clock import RealClock
from tssd.config import BackendSettings, Settings, SimSettings
from tssd.db.catalogs import SqlCatalogs
from tssd.db.models import SimObject, SimTape
from tssd.db.sim_catalog import SimCatalogTables
from tssd.errors import ChecksumMismatch, ConfigError, PermanentBackendError, TransientBackendError
from tssd.files import CountingSink, FileSource

SC = "atlas:tape"


def make_library(sessions: async_sessionmaker[Any], tmp_path: Path, **overrides: Any) -> SimLibrary:
    settings = dataclasses.replace(SimSettings(drives=2, tapes=3), **overrides)
    return SimLibrary(
        settings, SimCatalogTables(sessions), RealClock(), tmp_path / "sim", time_scale=0.0
    )


async def tapes(sessions: async_sessionmaker[Any]) -> list[SimTape]:
    async with sessions() as session:
        return list(await session.scalars(select(SimTape).order_by(SimTape.volume)))


async def write(lib: SimLibrary, tmp_path: Path, name: str, data: bytes) -> WriteResult:
    path = tmp_path / name
    path.write_bytes(data)
    item = WriteItem(name, SC, FileSource(path, len(data)))
    drive = "drive0"
    volume = await lib.writable_volume(SC, len(data))
    await lib.mount(drive, volume)
    (result,) = [r async for r in lib.write(drive, [item])]
    return result


async def read_one(lib: SimLibrary, copy: TapeCopy) -> tuple[ReadResult, CountingSink]:
    sink = CountingSink()
    await lib.mount("drive0", copy.volume)
    results = [r async for r in lib.read("drive0", [ReadItem(copy, sink)])]
    return results[0], sink


async def test_open_creates_named_tapes_once(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    stale = tmp_path / "sim" / "objects" / ".abc.tssd-part"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"interrupted write")
    async with make_library(sessions, tmp_path, tape_capacity=1000):
        assert not stale.exists()
    created = await tapes(sessions)
    assert [t.volume for t in created] == ["SIM000L9", "SIM001L9", "SIM002L9"]
    assert all(t.capacity == 1000 and t.used == 0 and t.storage_class is None for t in created)
    async with make_library(sessions, tmp_path, tapes=10) as again:
        assert all(d.volume is None for d in await again.drives())
    assert len(await tapes(sessions)) == 3
    assert (tmp_path / "sim" / "objects").is_dir()


async def test_restart_empties_drives_and_keeps_catalog(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path) as lib:
        result = await write(lib, tmp_path, "P1", b"payload")
        assert result.copy is not None
    async with make_library(sessions, tmp_path) as lib:
        assert [d.volume for d in await lib.drives()] == [None, None]
        assert (await lib.locate(["P1"]))["P1"] == [result.copy]


async def test_corrupt_media_is_checksum_mismatch(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path) as lib:
        copy = (await write(lib, tmp_path, "P1", b"good bytes")).copy
        assert copy is not None
        (tmp_path / "sim" / "objects" / copy.bfid).write_bytes(b"bad! bytes")
        result, sink = await read_one(lib, copy)
    assert isinstance(result.error, ChecksumMismatch)
    assert sink.aborted and not sink.committed


async def test_lost_media_is_permanent(sessions: async_sessionmaker[Any], tmp_path: Path) -> None:
    async with make_library(sessions, tmp_path) as lib:
        copy = (await write(lib, tmp_path, "P1", b"good bytes")).copy
        assert copy is not None
        (tmp_path / "sim" / "objects" / copy.bfid).unlink()
        result, sink = await read_one(lib, copy)
    assert isinstance(result.error, PermanentBackendError)
    assert sink.aborted


async def test_imported_object_reads_deterministic_filler(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    size = 3 * 1024 * 1024 + 5
    async with make_library(sessions, tmp_path) as lib:
        async with sessions() as session, session.begin():
            session.add(
                SimObject(
                    bfid="imp",
                    pnfsid="PIMP",
                    volume="SIM000L9",
                    seq=1,
                    size=size,
                    adler32="deadbeef",  # the real file's checksum: not ours to verify
                    has_data=False,
                )
            )
        copy = (await lib.locate(["PIMP"]))["PIMP"][0]
        first, _ = await read_one(lib, copy)
        second, _ = await read_one(lib, copy)
    assert first.error is None and first.nbytes == size
    assert first.adler32 == second.adler32 != "deadbeef"


async def test_tape_fills_then_next_scratch(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path, tape_capacity=100) as lib:
        first = (await write(lib, tmp_path, "P1", b"x" * 60)).copy
        second = (await write(lib, tmp_path, "P2", b"y" * 40)).copy
        third = (await write(lib, tmp_path, "P3", b"z" * 10)).copy
    assert first is not None and second is not None and third is not None
    assert first.volume == second.volume != third.volume
    assert (second.position, second.offset) == (2, 60)
    by_volume = {t.volume: t for t in await tapes(sessions)}
    assert by_volume[first.volume].full and by_volume[first.volume].used == 100
    assert not by_volume[third.volume].full


async def test_write_to_full_or_foreign_tape_is_transient(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path, tape_capacity=100) as lib:
        assert (await write(lib, tmp_path, "P1", b"x" * 90)).copy is not None
        path = tmp_path / "big"
        path.write_bytes(b"b" * 20)
        too_big = WriteItem("P2", SC, FileSource(path, 20))
        foreign = WriteItem("P3", "cms:tape", FileSource(path, 20))
        results = [r async for r in lib.write("drive0", [too_big, foreign])]
    assert all(isinstance(r.error, TransientBackendError) for r in results)
    assert all(r.copy is None for r in results)


async def test_write_leaves_no_stray_files(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path, tape_capacity=100) as lib:
        kept = (await write(lib, tmp_path, "P1", b"x" * 90)).copy
        assert kept is not None
        path = tmp_path / "big"
        path.write_bytes(b"b" * 20)
        results = [
            r async for r in lib.write("drive0", [WriteItem("P2", SC, FileSource(path, 20))])
        ]
        assert isinstance(results[0].error, TransientBackendError)
        again = await write(lib, tmp_path, "P1", b"x" * 90)
    assert again.copy == kept
    assert [p.name for p in (tmp_path / "sim" / "objects").iterdir()] == [kept.bfid]


async def test_write_checksum_accepts_dcache_spelling(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    data = b"\x00" * 3
    adler = zlib.adler32(data)
    path = tmp_path / "f"
    path.write_bytes(data)
    spelled = f"{adler:X}"  # upper case, leading zeros dropped
    async with make_library(sessions, tmp_path) as lib:
        await lib.mount("drive0", await lib.writable_volume(SC, 3))
        item = WriteItem("P1", SC, FileSource(path, 3), spelled)
        results = [r async for r in lib.write("drive0", [item])]
    assert results[0].error is None
    assert results[0].copy is not None and results[0].copy.adler32 == f"{adler:08x}"


async def test_unknown_drive_is_permanent(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path) as lib:
        with pytest.raises(PermanentBackendError):
            await lib.mount("drive9", "SIM000L9")


def test_profiles() -> None:
    assert get_profile("lto9").volume_suffix == "L9"
    t10k = get_profile("gridka-t10k")
    # Whole-tape recall of 2 GB files at GridKa: about 150 MB/s per drive.
    per_file = t10k.per_file_s + t10k.transfer_s(2 * 10**9)
    assert 2000 / per_file == pytest.approx(150, rel=0.2)
    assert "rate_mb_s" in t10k.as_dict()
    with pytest.raises(ConfigError, match="lto9"):
        get_profile("lto5")


async def test_factory(sessions: async_sessionmaker[Any], tmp_path: Path) -> None:
    settings = Settings(home=str(tmp_path), sim=SimSettings(tape_capacity=123))
    backend = create_backend(settings, SqlCatalogs(sessions), RealClock())
    assert isinstance(backend, SimLibrary)
    async with backend:
        assert (tmp_path / "sim" / "objects").is_dir()
    assert {t.capacity for t in await tapes(sessions)} == {123}
    bad = dataclasses.replace(settings, backend=BackendSettings(type="tsm"))
    with pytest.raises(ConfigError, match="'sim'"):
        create_backend(bad, SqlCatalogs(sessions), RealClock())

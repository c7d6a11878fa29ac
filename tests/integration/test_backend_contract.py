"""The TapeBackend contract (tssd/backends/base.py), written once for every backend.

Each backend joins by adding a factory to BACKENDS: an async context manager that takes a
temporary directory and yields an opened backend with at least two drives, a few empty
tapes and no delays.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from tssd.backends.base import ReadItem, ReadResult, TapeBackend, TapeCopy, WriteItem, WriteResult
from tssd.backends.scsi.library import ScsiLibrary, emulated_settings
from tssd.backends.sim import SimLibrary
from tssd.backends.sp.library import SpLibrary
from tssd.backends.sp.standin import LIBRARY_NAME, ServerSettings, make_server
from tssd.clock import RealClock
from tssd.config import ScsiSettings, SimSettings, SpSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.db.sim_catalog import SimCatalogTables
from tssd.errors import (
    ChecksumMismatch,
    NoSpace,
    ObjectNotFound,
    PermanentBackendError,
    TransientBackendError,
)
from tssd.files import FileSink, FileSource
from tssd.health import counts_against_hardware

SC = "atlas:tape"
MiB = 1024 * 1024

BackendFactory = Callable[[Path], AbstractAsyncContextManager[TapeBackend]]


@asynccontextmanager
async def sim_backend(tmp: Path) -> AsyncIterator[TapeBackend]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = SimSettings(drives=3, tapes=4, tape_capacity=64 * MiB)
        library = SimLibrary(
            settings,
            SimCatalogTables(session_factory(engine)),
            RealClock(),
            tmp / "sim",
            time_scale=0.0,
        )
        async with library:
            yield library
    finally:
        await engine.dispose()


@asynccontextmanager
async def scsi_backend(tmp: Path) -> AsyncIterator[TapeBackend]:
    """The SCSI backend on emulated devices: mtx emulator subprocess, file-backed drives."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = emulated_settings(
            ScsiSettings(
                block_size=64 * 1024,
                tape_capacity=64 * MiB,
                emulation_drives=3,
                emulation_tapes=4,
                emulation_capacity=64 * MiB,
            ),
            tmp / "vtl",
        )
        async with ScsiLibrary(
            settings, ScsiCatalogTables(session_factory(engine)), RealClock()
        ) as library:
            yield library
    finally:
        await engine.dispose()


@asynccontextmanager
async def sp_backend(tmp: Path, build: Path) -> AsyncIterator[TapeBackend]:
    """The SP backend on the stand-in client API library (tssd/backends/sp/standin): a
    server directory of 64 MiB volumes, three mount points; the stand-in's dsmadmc names
    the volumes."""
    options = make_server(
        tmp / "server", ServerSettings(capacity_bytes=64 * MiB, max_mount_points=3)
    )
    settings = SpSettings(
        api_library=str(build / LIBRARY_NAME),
        options_file=str(options),
        node="TSSD",
        max_mount_points=3,
        volume_capacity=64 * MiB,
        admin_command=f"{build / 'dsmadmc'} -optfile={options} -dataonly=yes -comma",
        buffer_size=256 * 1024,
    )
    async with SpLibrary(settings) as library:
        yield library


#: Set by tests/vm inside the qemu guest: the real library (tgt changer and drives through
#: the kernel's st and sg drivers, the real mtx), described by a JSON file.
SCSI_VM = os.environ.get("TSSD_SCSI_VM")


def reset_vm_library(vm: dict[str, str]) -> None:
    """Every cartridge back in its slot and blank, as a fresh library: tgt opens a tape's
    file only while it is in a drive, so recreating the file blanks the cartridge."""
    status = subprocess.run(
        ["mtx", "-f", vm["changer"], "status"], capture_output=True, text=True, check=True
    ).stdout
    for line in status.splitlines():
        if line.startswith("Data Transfer Element") and ":Full" in line:
            element = line.split()[3].rstrip(":")
            source = line.split("Storage Element ")[1].split()[0]
            subprocess.run(["mtx", "-f", vm["changer"], "unload", source, element], check=True)
    for barcode in vm["volumes"].split():
        path = Path(vm["vtl"]) / barcode
        path.unlink(missing_ok=True)
        subprocess.run(
            [
                *("tgtimg", "--op", "new", "--device-type", "tape", "--barcode", barcode),
                *("--size", str(vm["tape_mb"]), "--type", "data", "--file", str(path)),
            ],
            check=True,
            capture_output=True,
        )


@asynccontextmanager
async def scsi_vm_backend(tmp: Path) -> AsyncIterator[TapeBackend]:
    """The SCSI backend on the real stack of the tests/vm guest: mtx on tgt's changer,
    the kernel's st driver on tgt's drives (tests/vm/test_vm_scsi.py runs this)."""
    assert SCSI_VM is not None
    vm = json.loads(Path(SCSI_VM).read_text())
    await asyncio.to_thread(reset_vm_library, vm)
    engine = create_engine(f"sqlite+aiosqlite:///{tmp / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = ScsiSettings(
            changer=vm["changer"],
            mtx="mtx",
            drives=vm["drives"],
            device_layer="st",
            block_size=64 * 1024,
            tape_capacity=int(vm["tape_mb"]) * MiB,
            volumes="^TSS",
        )
        async with ScsiLibrary(
            settings, ScsiCatalogTables(session_factory(engine)), RealClock()
        ) as library:
            yield library
    finally:
        await engine.dispose()


BACKENDS = (
    [pytest.param(scsi_vm_backend, id="scsi-st")]
    if SCSI_VM
    else [
        pytest.param(sim_backend, id="sim"),
        pytest.param(scsi_backend, id="scsi"),
        pytest.param(sp_backend, id="sp", marks=pytest.mark.sp),
    ]
)


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TapeBackend]:
    factory: BackendFactory = request.param
    if factory is sp_backend:
        factory = functools.partial(sp_backend, build=request.getfixturevalue("sp_build"))
    backend_dir = tmp_path / "backend"
    backend_dir.mkdir()
    async with factory(backend_dir) as opened:
        yield opened


@pytest.fixture
def files(tmp_path: Path) -> Path:
    path = tmp_path / "pool"
    path.mkdir()
    return path


def make_file(directory: Path, name: str, size: int) -> tuple[Path, str]:
    path = directory / name
    data = os.urandom(size)
    path.write_bytes(data)
    return path, f"{zlib.adler32(data):08x}"


def pnfsid(n: int) -> str:
    return f"0000{n:032X}"


async def drive_names(backend: TapeBackend) -> list[str]:
    return [d.name for d in await backend.drives()]


async def write_all(backend: TapeBackend, drive: str, items: list[WriteItem]) -> list[WriteResult]:
    return [result async for result in backend.write(drive, items)]


async def read_all(backend: TapeBackend, drive: str, items: list[ReadItem]) -> list[ReadResult]:
    return [result async for result in backend.read(drive, items)]


async def store(
    backend: TapeBackend,
    files: Path,
    sizes: list[int],
    *,
    storage_class: str = SC,
    start: int = 0,
) -> list[TapeCopy]:
    """Write one random file per size to a tape of *storage_class*; return the copies."""
    items = []
    for i, size in enumerate(sizes, start):
        path, adler = make_file(files, f"in{i}", size)
        items.append(WriteItem(pnfsid(i), storage_class, FileSource(path, size), adler))
    drive = (await drive_names(backend))[0]
    volume = await backend.writable_volume(storage_class, sum(sizes))
    await backend.mount(drive, volume)
    results = await write_all(backend, drive, items)
    assert [r.error for r in results] == [None] * len(items)
    copies = [r.copy for r in results]
    assert all(c is not None for c in copies)
    return [c for c in copies if c is not None]


# -- drives and mounts --------------------------------------------------------------------


async def test_drives_start_empty(backend: TapeBackend) -> None:
    drives = await backend.drives()
    assert len(drives) >= 2
    assert all(d.volume is None for d in drives)


async def test_mount_and_dismount(backend: TapeBackend) -> None:
    drive = (await drive_names(backend))[0]
    volume = await backend.writable_volume(SC, 1)
    await backend.mount(drive, volume)
    assert {d.name: d.volume for d in await backend.drives()}[drive] == volume
    await backend.mount(drive, volume)  # already there: nothing to do
    await backend.dismount(drive)
    assert all(d.volume is None for d in await backend.drives())
    await backend.dismount(drive)  # empty: no-op


async def test_mount_replaces_loaded_volume(backend: TapeBackend) -> None:
    drive = (await drive_names(backend))[0]
    first = await backend.writable_volume(SC, 1)
    second = await backend.writable_volume("cms:tape", 1)
    await backend.mount(drive, first)
    await backend.mount(drive, second)
    loaded = [d.volume for d in await backend.drives() if d.volume]
    assert loaded == [second]


async def test_volume_never_in_two_drives(backend: TapeBackend) -> None:
    d0, d1 = (await drive_names(backend))[:2]
    volume = await backend.writable_volume(SC, 1)
    await backend.mount(d0, volume)
    with pytest.raises(TransientBackendError):
        await backend.mount(d1, volume)
    await backend.dismount(d0)
    outcomes = await asyncio.gather(
        backend.mount(d0, volume), backend.mount(d1, volume), return_exceptions=True
    )
    assert sum(o is None for o in outcomes) == 1
    assert sum(isinstance(o, TransientBackendError) for o in outcomes) == 1
    assert [d.volume for d in await backend.drives()].count(volume) == 1


async def test_mount_unknown_volume_is_permanent(backend: TapeBackend) -> None:
    drive = (await drive_names(backend))[0]
    with pytest.raises(PermanentBackendError):
        await backend.mount(drive, "NOSUCHL9")


# -- write, locate, read ------------------------------------------------------------------


async def test_write_locate_read_back(backend: TapeBackend, files: Path) -> None:
    sizes = [0, 1, 3 * MiB + 17]
    copies = await store(backend, files, sizes)
    assert [c.size for c in copies] == sizes
    assert len({c.volume for c in copies}) == 1
    assert [c.position for c in copies] == sorted(c.position for c in copies)

    found = await backend.locate([pnfsid(i) for i in range(len(sizes))] + [pnfsid(99)])
    assert set(found) == {pnfsid(i) for i in range(len(sizes))}
    assert [found[c.pnfsid] for c in copies] == [[c] for c in copies]

    out = files / "out"
    out.mkdir()
    drive = (await drive_names(backend))[0]
    items = [ReadItem(c, FileSink(out / c.pnfsid)) for c in copies]
    results = await read_all(backend, drive, items)
    for i, (copy, result) in enumerate(zip(copies, results, strict=True)):
        assert result.error is None
        original = (files / f"in{i}").read_bytes()
        assert (out / copy.pnfsid).read_bytes() == original
        assert result.nbytes == len(original)
        assert result.adler32 == copy.adler32 == f"{zlib.adler32(original):08x}"
    assert sorted(p.name for p in out.iterdir()) == sorted(c.pnfsid for c in copies)


async def test_read_follows_given_order(backend: TapeBackend, files: Path) -> None:
    copies = await store(backend, files, [1000, 2000, 3000, 4000])
    order = [copies[2], copies[0], copies[3], copies[1]]
    drive = (await drive_names(backend))[0]
    out = files / "out"
    out.mkdir()
    results = await read_all(backend, drive, [ReadItem(c, FileSink(out / c.pnfsid)) for c in order])
    assert [r.item.copy for r in results] == order
    assert all(r.error is None for r in results)


async def test_read_without_or_with_wrong_volume_is_transient(
    backend: TapeBackend, files: Path
) -> None:
    copies = await store(backend, files, [10])
    d1 = (await drive_names(backend))[1]
    with pytest.raises(TransientBackendError):
        await read_all(backend, d1, [ReadItem(copies[0], FileSink(files / "x"))])
    other = await backend.writable_volume("cms:tape", 1)
    await backend.mount(d1, other)
    with pytest.raises(TransientBackendError):
        await read_all(backend, d1, [ReadItem(copies[0], FileSink(files / "x"))])
    assert not (files / "x").exists()


async def test_write_is_idempotent(backend: TapeBackend, files: Path) -> None:
    first = (await store(backend, files, [5000]))[0]
    drive = (await drive_names(backend))[0]
    source = FileSource(files / "in0", 5000)
    with_sum = await write_all(backend, drive, [WriteItem(pnfsid(0), SC, source, first.adler32)])
    without_sum = await write_all(backend, drive, [WriteItem(pnfsid(0), SC, source)])
    assert with_sum[0].copy == first
    assert without_sum[0].copy == first
    assert (await backend.locate([pnfsid(0)]))[pnfsid(0)] == [first]


async def test_write_checksum_mismatch_records_nothing(backend: TapeBackend, files: Path) -> None:
    path, adler = make_file(files, "bad", 4096)
    wrong = f"{(int(adler, 16) + 1) & 0xFFFFFFFF:08x}"
    drive = (await drive_names(backend))[0]
    await backend.mount(drive, await backend.writable_volume(SC, 4096))
    results = await write_all(
        backend, drive, [WriteItem(pnfsid(7), SC, FileSource(path, 4096), wrong)]
    )
    assert isinstance(results[0].error, ChecksumMismatch)
    assert results[0].copy is None
    assert await backend.locate([pnfsid(7)]) == {}


async def test_write_unreadable_source_is_reported(backend: TapeBackend, files: Path) -> None:
    drive = (await drive_names(backend))[0]
    await backend.mount(drive, await backend.writable_volume(SC, 10))
    missing = WriteItem(pnfsid(8), SC, FileSource(files / "missing", 10))
    path, _ = make_file(files, "ok", 10)
    fine = WriteItem(pnfsid(9), SC, FileSource(path, 10))
    results = await write_all(backend, drive, [missing, fine])
    assert results[0].error is not None and results[0].copy is None
    assert results[1].error is None and results[1].copy is not None


async def test_remove(backend: TapeBackend, files: Path) -> None:
    copy = (await store(backend, files, [100]))[0]
    await backend.remove(copy.bfid)
    assert await backend.locate([copy.pnfsid]) == {}
    with pytest.raises(ObjectNotFound):
        await backend.remove(copy.bfid)
    drive = (await drive_names(backend))[0]
    results = await read_all(backend, drive, [ReadItem(copy, FileSink(files / "gone"))])
    assert isinstance(results[0].error, ObjectNotFound)
    assert not list(files.glob("*gone*"))


async def test_copies_removed_while_their_batch_is_read_are_not_media_errors(
    backend: TapeBackend, files: Path
) -> None:
    """An operator (or dCache) removes copies while their recalls are claimed and read:
    the objects the catalog no longer has fail as such, never as a fault of the drive or
    the tape (tssd.health), which would take the only drive out of service."""
    copies = await store(backend, files, [1000, 2000, 3000, 4000])
    drive = (await drive_names(backend))[0]
    items = [ReadItem(c, FileSink(files / f"out{n}")) for n, c in enumerate(copies)]
    results = []
    async for result in backend.read(drive, items):
        results.append(result)
        if len(results) == 1:
            for copy in copies[1:]:
                await backend.remove(copy.bfid)
    assert results[0].error is None
    for result in results[1:]:
        assert isinstance(result.error, ObjectNotFound), result.error
        assert not counts_against_hardware(result.error)
    assert sorted(p.name for p in files.glob("*out*")) == ["out0"]


async def test_filling_tape_per_storage_class(backend: TapeBackend, files: Path) -> None:
    atlas = await store(backend, files, [100, 200], storage_class=SC)
    more_atlas = await store(backend, files, [300], storage_class=SC, start=2)
    cms = await store(backend, files, [400], storage_class="cms:tape", start=3)
    assert {c.volume for c in atlas} == {more_atlas[0].volume}
    if backend.name != "sp":
        # On SP the server's policy, not tssd, chooses the volume: its pool's filling one.
        assert cms[0].volume != atlas[0].volume
    assert await backend.writable_volume(SC, 1) == atlas[0].volume
    assert await backend.writable_volume("cms:tape", 1) == cms[0].volume


async def test_library_full_is_permanent(backend: TapeBackend) -> None:
    with pytest.raises(PermanentBackendError):
        await backend.writable_volume(SC, 10**18)


class FullDiskSink(FileSink):
    """A pool file system that fills up after the first chunk."""

    async def write(self, data: bytes) -> None:
        if self.nbytes:
            raise NoSpace(f"no space left writing {self.path}")
        await super().write(data)


async def test_sink_error_is_reported_and_leaves_nothing(backend: TapeBackend, files: Path) -> None:
    big, small = await store(backend, files, [3 * MiB, 100])
    out = files / "out"
    out.mkdir()
    drive = (await drive_names(backend))[0]
    items = [ReadItem(big, FullDiskSink(out / "big")), ReadItem(small, FileSink(out / "small"))]
    results = await read_all(backend, drive, items)
    assert isinstance(results[0].error, NoSpace)
    assert results[1].error is None
    assert [p.name for p in out.iterdir()] == ["small"]

"""The SCSI backend's failure handling, on emulated devices through the real code path:
drive not ready, media errors, end of medium, an unexpected tape in a drive, a hung
load, a tape whose label is not its barcode, write protection, renumbered drives and a
restart with tapes left in drives."""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from tssd.backends.base import ReadItem, TapeCopy, WriteItem
from tssd.backends.scsi import emulated
from tssd.backends.scsi.changer import ChangerTimeout
from tssd.backends.scsi.library import ScsiLibrary, emulated_settings
from tssd.backends.scsi.tapedev import DriveNotReady, EndOfMedium, MediaError, WriteProtected
from tssd.clock import RealClock
from tssd.config import ScsiSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.errors import ConfigError, PermanentBackendError, TransientBackendError
from tssd.files import FileSink, FileSource
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.tape.geometry import ESTIMATE_SPREAD

KiB = 1024
SC = "atlas:tape"

Factory = Callable[..., AbstractAsyncContextManager[ScsiLibrary]]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}")
    async with eng.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    yield eng
    await eng.dispose()


@pytest.fixture
def vtl(tmp_path: Path) -> Path:
    return tmp_path / "vtl"


@pytest.fixture
def open_library(engine: AsyncEngine, vtl: Path) -> Factory:
    @asynccontextmanager
    async def factory(**overrides: Any) -> AsyncIterator[ScsiLibrary]:
        base = ScsiSettings(
            block_size=4 * KiB,
            tape_capacity=1024 * KiB,
            emulation_drives=2,
            emulation_tapes=3,
            emulation_capacity=256 * KiB,
        )
        settings = dataclasses.replace(emulated_settings(base, vtl), **overrides)
        async with ScsiLibrary(
            settings, ScsiCatalogTables(session_factory(engine)), RealClock()
        ) as library:
            yield library

    return factory


def items(directory: Path, sizes: list[int], start: int = 0) -> list[WriteItem]:
    out = []
    for n, size in enumerate(sizes, start):
        data = os.urandom(size)
        path = directory / f"in{n}"
        path.write_bytes(data)
        out.append(
            WriteItem(f"0000{n:032X}", SC, FileSource(path, size), f"{zlib.adler32(data):08x}")
        )
    return out


async def write(library: ScsiLibrary, drive: str, batch: list[WriteItem]) -> list[TapeCopy]:
    volume = await library.writable_volume(SC, sum(i.source.size for i in batch))
    await library.mount(drive, volume)
    copies = []
    async for result in library.write(drive, batch):
        assert result.error is None and result.copy is not None
        copies.append(result.copy)
    return copies


def faults(vtl: Path, **values: Any) -> None:
    emulated.save_faults(vtl, values)


async def test_drive_becoming_ready_is_retried(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        faults(vtl, not_ready={drive: 2})
        volume = await library.writable_volume(SC, 1)
        with pytest.raises(DriveNotReady):
            await library.mount(drive, volume)
        # The cartridge is in the drive; retrying the mount only waits for readiness.
        assert {d.name: d.volume for d in await library.drives()}[drive] == volume
        retrier = Retrier(RetryPolicy(attempts=3, base_s=0.0), Metrics(), RealClock())
        await retrier.call("mount", lambda: library.mount(drive, volume))
        copies = await write(library, drive, items(tmp_path, [5000]))
        assert copies[0].volume == volume


async def test_media_error_fails_one_object_only(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        copies = await write(library, drive, items(tmp_path, [5000, 9000, 100]))
        await library.dismount(drive)
        objects = [await library._catalog.object(c.bfid) for c in copies]
        bad = objects[1]
        assert bad is not None
        faults(vtl, media_errors={bad.volume: [bad.block + 1]})
        await library.mount(drive, copies[0].volume)
        out = tmp_path / "out"
        out.mkdir()
        reads = [ReadItem(c, FileSink(out / c.pnfsid)) for c in copies]
        results = [r async for r in library.read(drive, reads)]
        assert [type(r.error) for r in results] == [type(None), MediaError, type(None)]
        assert isinstance(results[1].error, PermanentBackendError)
        assert sorted(p.name for p in out.iterdir()) == sorted([copies[0].pnfsid, copies[2].pnfsid])
        assert (out / copies[2].pnfsid).read_bytes() == (tmp_path / "in2").read_bytes()


async def test_end_of_medium_closes_the_tape(open_library: Factory, tmp_path: Path) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        batch = items(tmp_path, [60 * KiB] * 6)  # 360 KiB for a 256 KiB tape
        volume = await library.writable_volume(SC, 60 * KiB)
        await library.mount(drive, volume)
        written = []
        with pytest.raises(EndOfMedium):
            async for result in library.write(drive, batch):
                written.append(result.copy)
        assert 1 <= len(written) < 6
        row = await library._catalog.tape(volume)
        assert row is not None and row.full and row.state == "ok"
        with pytest.raises(EndOfMedium):
            _ = [r async for r in library.write(drive, batch[len(written) :])]
        nxt = await library.writable_volume(SC, 60 * KiB)
        assert nxt != volume
        rest = await write(library, drive, batch[len(written) :])
        assert {c.volume for c in rest} == {nxt}
        found = await library.locate([i.pnfsid for i in batch])
        assert len(found) == 6
        # Everything on the full tape still reads back.
        await library.mount(drive, volume)
        sinks = [ReadItem(c, FileSink(tmp_path / f"back{n}")) for n, c in enumerate(written) if c]
        assert [r.error async for r in library.read(drive, sinks)] == [None] * len(sinks)


async def test_unexpected_tape_in_drive_is_put_back(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        # An operator loads slot 3 into drive 0 behind tssd's back.
        await library.changer.load(3, 0)
        volume = await library.writable_volume(SC, 1)
        assert volume != "E01003L8"
        await library.mount(drive, volume)
        inventory = await library.changer.status()
        assert inventory.drive(0) is not None and inventory.drive(0).volume == volume  # type: ignore[union-attr]
        assert inventory.slot_of("E01003L8") is not None
        await library.dismount(drive)
        assert inventory.slot_of(volume) is None
        assert (await library.changer.status()).slot_of(volume) is not None


async def test_hung_load_times_out_and_the_next_mount_works(
    open_library: Factory, vtl: Path
) -> None:
    async with open_library(move_timeout_s=4.0) as library:
        drive = (await library.drives())[0].name
        volume = await library.writable_volume(SC, 1)
        faults(vtl, hang_load_s=120)
        with pytest.raises(ChangerTimeout):
            await library.mount(drive, volume)
        assert isinstance(ChangerTimeout("x"), TransientBackendError)
        assert all(d.volume is None for d in await library.drives())
        await library.mount(drive, volume)  # the robot answers again
        assert {d.name: d.volume for d in await library.drives()}[drive] == volume


async def test_tape_with_another_label_is_refused_and_disabled(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        first = (await write(library, drive, items(tmp_path, [100])))[0].volume
        await library.dismount(drive)
        other = await library.writable_volume("cms:tape", 1)
        await library.mount(drive, other)
        _ = [
            r
            async for r in library.write(
                drive, [dataclasses.replace(items(tmp_path, [10], 5)[0], storage_class="cms:tape")]
            )
        ]
        await library.dismount(drive)
        # Someone swapped the barcode labels of the two cartridges.
        tapes = vtl / "tapes"
        os.replace(tapes / f"{first}.tape", tapes / "swap")
        os.replace(tapes / f"{other}.tape", tapes / f"{first}.tape")
        os.replace(tapes / "swap", tapes / f"{other}.tape")
        with pytest.raises(PermanentBackendError, match=f"carries {other}"):
            await library.mount(drive, first)
        row = await library._catalog.tape(first)
        assert row is not None and row.state == "disabled"
        with pytest.raises(PermanentBackendError, match="disabled"):
            await library.mount(drive, first)
        assert await library.writable_volume(SC, 1) != first


async def test_write_protected_tape(open_library: Factory, vtl: Path, tmp_path: Path) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        volume = await library.writable_volume(SC, 1)
        faults(vtl, write_protected=[volume])
        await library.mount(drive, volume)
        with pytest.raises(WriteProtected):
            _ = [r async for r in library.write(drive, items(tmp_path, [10]))]
        assert await library.writable_volume(SC, 1) != volume


async def test_renumbered_drives_are_refused(open_library: Factory, vtl: Path) -> None:
    swapped = f"EMU_A1@0={vtl / 'nst1'},EMU_A2@1={vtl / 'nst0'}"
    with pytest.raises(ConfigError, match="not EMU_A1"):
        async with open_library(drives=swapped):
            pass
    with pytest.raises(ConfigError, match="no Data Transfer Element 7"):
        async with open_library(drives=f"EMU_A1@7={vtl / 'nst0'}"):
            pass


async def test_restart_with_a_tape_in_a_drive(open_library: Factory, tmp_path: Path) -> None:
    async with open_library() as library:
        drive = (await library.drives())[0].name
        copies = await write(library, drive, items(tmp_path, [3000]))
    async with open_library() as library:
        assert {d.name: d.volume for d in await library.drives()}[drive] == copies[0].volume
        other = (await library.drives())[1].name
        with pytest.raises(TransientBackendError):
            await library.mount(other, copies[0].volume)
        results = [
            r async for r in library.read(drive, [ReadItem(copies[0], FileSink(tmp_path / "o"))])
        ]
        assert results[0].error is None
        assert (tmp_path / "o").read_bytes() == (tmp_path / "in0").read_bytes()


async def test_restart_with_an_unloaded_tape_in_a_drive(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    """A stop cut short between the drive's unload and the robot's move (issue 22,
    ``scheduler.shutdown_unload_s``): the next start puts the cartridge back in its slot,
    and it is mounted and read as any other."""
    async with open_library() as library:
        drive = (await library.drives())[0].name
        copies = await write(library, drive, items(tmp_path, [3000]))
        tape = library._drives[drive].tape
        assert tape is not None
        await tape.offline()
    async with open_library() as library:
        assert {d.name: d.volume for d in await library.drives()}[drive] is None
        other = (await library.drives())[1].name
        await library.mount(other, copies[0].volume)
        results = [
            r async for r in library.read(other, [ReadItem(copies[0], FileSink(tmp_path / "o"))])
        ]
        assert results[0].error is None
        assert (tmp_path / "o").read_bytes() == (tmp_path / "in0").read_bytes()


async def test_a_drive_without_read_end_of_wrap_position_leaves_the_nominal_geometry(
    open_library: Factory, tmp_path: Path
) -> None:
    """The emulated drives reject READ END OF WRAP POSITION as tgt does (usr/spc.c,
    spc_service_action: MAINTENANCE IN service actions other than 0Ch get ILLEGAL REQUEST,
    invalid field in CDB): the mount works, the geometry is the media type's nominal one,
    the refusal is logged once per drive and the drive is not asked again."""
    async with open_library() as library:
        drive = (await library.drives())[0].name
        copies = await write(library, drive, items(tmp_path, [9000] * 3))
        volume = copies[0].volume
        with capture_logs() as logs:
            for _ in range(2):
                await library.dismount(drive)
                await library.mount(drive, volume)
                geometry = await library.geometry(volume)
                assert geometry is not None and not geometry.wrap_ends
                assert geometry.position_spread == ESTIMATE_SPREAD
        events = [e for e in logs if e["event"] == "scsi.drive.wrap_ends_unavailable"]
        assert len(events) == 1 and events[0]["drive"] == drive and events[0]["unsupported"]


async def test_a_drive_reporting_its_wraps_places_the_objects(
    open_library: Factory, vtl: Path, tmp_path: Path
) -> None:
    """An IBM-like drive (emulated: 5 logical objects per wrap) reports each wrap's last
    object; the label and its filemark are objects 0 and 1, each object of 9,000 bytes a
    header, three 4 KiB data blocks and a filemark: object k starts block 2 + 5k, which
    is on wrap (2 + 5k) // 5 = k."""
    async with open_library() as library:
        drive = (await library.drives())[0].name
        faults(vtl, wrap_blocks={drive: 5})
        copies = await write(library, drive, items(tmp_path, [9000] * 6))
        await library.dismount(drive)
        volume = copies[0].volume
        await library.mount(drive, volume)
        geometry = await library.geometry(volume)
        assert geometry is not None and geometry.position_spread == 0.0
        assert geometry.wrap_ends == tuple(b * 4 * KiB for b in (3, 8, 13, 18, 23, 28))
        cap = geometry.capacity_bytes
        assert [geometry.wrap_of(c.offset, cap) for c in copies] == list(range(6))
        # Written again: the report is asked again at the next look.
        _ = await write(library, drive, items(tmp_path, [9000], start=6))
        again = await library.geometry(volume)
        assert again is not None and len(again.wrap_ends) == 7

"""500 files of random sizes through the SCSI backend on emulated devices: 2 drives,
4 tapes, two storage classes written at once, one class filling its tape and rolling
over to the next; every byte read back."""

from __future__ import annotations

import asyncio
import random
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tssd.backends.base import ReadItem, TapeCopy, WriteItem
from tssd.backends.scsi.library import ScsiLibrary, emulated_settings
from tssd.backends.scsi.tapedev import EndOfMedium
from tssd.clock import RealClock
from tssd.config import ScsiSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.files import FileSink, FileSource

KiB = 1024
MiB = 1024 * KiB
FILES = 500
# Per class: (files, drive index). atlas needs about 1.5 tapes of 12 MiB, cms less than one.
CLASSES = {"atlas:tape": 300, "cms:tape": 200}


@pytest.fixture
async def library(tmp_path: Path) -> AsyncIterator[ScsiLibrary]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = emulated_settings(
            ScsiSettings(
                block_size=8 * KiB,
                tape_capacity=12 * MiB,
                emulation_drives=2,
                emulation_tapes=4,
                emulation_capacity=12 * MiB,
            ),
            tmp_path / "vtl",
        )
        async with ScsiLibrary(
            settings, ScsiCatalogTables(session_factory(engine)), RealClock()
        ) as lib:
            yield lib
    finally:
        await engine.dispose()


def make_files(directory: Path, rng: random.Random) -> dict[str, list[WriteItem]]:
    items: dict[str, list[WriteItem]] = {}
    n = 0
    for storage_class, count in CLASSES.items():
        for _ in range(count):
            size = (
                rng.choice([0, 1, 8 * KiB, 8 * KiB + 1]) if n % 25 == 0 else rng.randrange(80 * KiB)
            )
            data = rng.randbytes(size)
            path = directory / f"{n:04d}"
            path.write_bytes(data)
            pnfsid = f"0000{n:032X}"
            items.setdefault(storage_class, []).append(
                WriteItem(
                    pnfsid, storage_class, FileSource(path, size), f"{zlib.adler32(data):08x}"
                )
            )
            n += 1
    return items


async def migrate(
    lib: ScsiLibrary, drive: str, items: list[WriteItem]
) -> tuple[list[TapeCopy], int]:
    """What the scheduler does: write until done, moving on when a tape fills up."""
    pending, copies, rollovers = list(items), [], 0
    while pending:
        volume = await lib.writable_volume(
            pending[0].storage_class, sum(i.source.size for i in pending)
        )
        await lib.mount(drive, volume)
        try:
            async for result in lib.write(drive, list(pending)):
                assert result.error is None and result.copy is not None
                copies.append(result.copy)
                pending.remove(result.item)
        except EndOfMedium:
            rollovers += 1
    await lib.dismount(drive)
    return copies, rollovers


async def recall(
    lib: ScsiLibrary, drive: str, volumes: list[str], copies: list[TapeCopy], out: Path
) -> int:
    done = 0
    for volume in volumes:
        await lib.mount(drive, volume)
        on_tape = sorted((c for c in copies if c.volume == volume), key=lambda c: c.position)
        items = [ReadItem(c, FileSink(out / c.pnfsid)) for c in on_tape]
        async for result in lib.read(drive, items):
            assert result.error is None, result.error
            done += 1
        await lib.dismount(drive)
    return done


async def test_500_files_round_trip_with_rollover(library: ScsiLibrary, tmp_path: Path) -> None:
    source_dir, out = tmp_path / "pool", tmp_path / "out"
    source_dir.mkdir()
    out.mkdir()
    items = make_files(source_dir, random.Random(8))
    drives = [d.name for d in await library.drives()]
    assert len(drives) == 2

    written = await asyncio.gather(
        *(
            migrate(library, drive, batch)
            for drive, batch in zip(drives, items.values(), strict=True)
        )
    )
    copies = [c for batch, _ in written for c in batch]
    assert len(copies) == FILES
    atlas_volumes = {c.volume for c in written[0][0]}
    cms_volumes = {c.volume for c in written[1][0]}
    assert written[0][1] >= 1 and len(atlas_volumes) >= 2, "atlas must fill a tape and roll over"
    assert not atlas_volumes & cms_volumes
    assert len(atlas_volumes | cms_volumes) <= 4

    volumes = sorted(atlas_volumes | cms_volumes)
    found = await library.locate([c.pnfsid for c in copies])
    assert {p: [c] for c in copies for p in [c.pnfsid]} == found

    counts = await asyncio.gather(
        recall(library, drives[0], volumes[0::2], copies, out),
        recall(library, drives[1], volumes[1::2], copies, out),
    )
    assert sum(counts) == FILES
    for item in (i for batch in items.values() for i in batch):
        assert isinstance(item.source, FileSource)
        assert (out / item.pnfsid).read_bytes() == item.source.path.read_bytes()

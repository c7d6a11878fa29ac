"""In the guest (tests/vm/test_vm_scsi.py): the files the host put in $VM_SHARE/in go
to tape through the SCSI backend on st and mtx, two storage classes on two drives, the
larger one rolling over to a second tape at end of medium; then every file is recalled
into $VM_SHARE/out, tape by tape, and the host compares the bytes. Prints a JSON summary.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from test_backend_contract import reset_vm_library

from tssd.backends.base import ReadItem, TapeCopy, WriteItem
from tssd.backends.scsi.library import ScsiLibrary
from tssd.backends.scsi.sgio import drive_identifiers
from tssd.backends.scsi.tapedev import EndOfMedium
from tssd.clock import RealClock
from tssd.config import ScsiSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.files import FileSink, FileSource

SHARE = Path(os.environ["VM_SHARE"])
TAPE_MB = 4
BLOCK = 8 * 1024


async def migrate(
    lib: ScsiLibrary, drive: str, items: list[WriteItem]
) -> tuple[list[TapeCopy], int]:
    pending, copies, rollovers = list(items), [], 0
    while pending:
        volume = await lib.writable_volume(
            pending[0].storage_class, sum(i.source.size for i in pending)
        )
        await lib.mount(drive, volume)
        try:
            async for result in lib.write(drive, list(pending)):
                assert result.error is None and result.copy is not None, result.error
                copies.append(result.copy)
                pending.remove(result.item)
        except EndOfMedium:
            rollovers += 1
    await lib.dismount(drive)
    return copies, rollovers


async def main() -> None:
    vm = json.loads(Path(os.environ["TSSD_SCSI_VM"]).read_text())
    reset_vm_library({**vm, "tape_mb": TAPE_MB})
    manifest = json.loads((SHARE / "in" / "manifest.json").read_text())
    work = Path("/tmp/roundtrip")
    work.mkdir(exist_ok=True)
    engine = create_engine(f"sqlite+aiosqlite:///{work / 'tssd.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    settings = ScsiSettings(
        changer=vm["changer"],
        mtx="mtx",
        drives=vm["drives"],
        device_layer="st",
        block_size=BLOCK,
        tape_capacity=TAPE_MB * 1024 * 1024,
        volumes="^TSS",
    )
    summary: dict[str, object] = {
        "elements": [[e.address, e.index, e.serial] for e in drive_identifiers(vm["changer"])],
    }
    loads = 0
    async with ScsiLibrary(
        settings, ScsiCatalogTables(session_factory(engine)), RealClock()
    ) as lib:
        drives = [d.name for d in await lib.drives()]
        by_class: dict[str, list[WriteItem]] = {}
        for entry in manifest:
            path = SHARE / "in" / entry["name"]
            by_class.setdefault(entry["class"], []).append(
                WriteItem(
                    entry["pnfsid"],
                    entry["class"],
                    FileSource(path, entry["size"]),
                    entry["adler32"],
                )
            )
        started = time.monotonic()
        results = await asyncio.gather(
            *(
                migrate(lib, drive, items)
                for drive, items in zip(drives, by_class.values(), strict=False)
            )
        )
        write_s = time.monotonic() - started
        copies = [c for cs, _ in results for c in cs]
        rollovers = sum(r for _, r in results)
        out = SHARE / "out"
        out.mkdir(exist_ok=True)
        started = time.monotonic()
        volumes = sorted({c.volume for c in copies})
        mount_s = []
        geometries = []
        for n, volume in enumerate(volumes):
            drive = drives[n % len(drives)]
            t0 = time.monotonic()
            await lib.mount(drive, volume)
            mount_s.append(time.monotonic() - t0)
            loads += 1
            # READ END OF WRAP POSITION after the mount: tgt rejects it, the geometry stays
            # the nominal one of the barcode's media (L8).
            geometry = await lib.geometry(volume)
            geometries.append(
                [len(geometry.wrap_ends), geometry.position_spread] if geometry else None
            )
            on_tape = sorted((c for c in copies if c.volume == volume), key=lambda c: c.position)
            items = [ReadItem(c, FileSink(out / c.pnfsid)) for c in on_tape]
            async for result in lib.read(drive, items):
                assert result.error is None, result.error
            await lib.dismount(drive)
        read_s = time.monotonic() - started
        positioning = lib.positioning()
        wrap_reports = {d.name: d.wraps.supported for d in lib._drives.values()}
    await engine.dispose()
    total = sum(c.size for c in copies)
    summary.update(
        files=len(copies),
        bytes=total,
        rollovers=rollovers,
        volumes=volumes,
        write_s=round(write_s, 2),
        read_s=round(read_s, 2),
        recall_loads=loads,
        mount_s=[round(s, 2) for s in mount_s],
        positioning=positioning,
        geometries=geometries,
        wrap_reports=wrap_reports,
        copies=[[c.pnfsid, c.volume, c.position, c.adler32] for c in copies],
    )
    print("ROUNDTRIP " + json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())

"""In the guest (tests/vm/test_vm_scsi.py): faults on the real stack, each reported as a
``FAULT name {json}`` line for the host to check.

* removed: a cartridge taken out of its slot behind tssd's back (tgtadm clear_slot);
* offline: a drive taken offline (tgtadm online=0) while it holds a cartridge;
* killed: the writing process SIGKILLed in the middle of an object; a new process (a
  restarted tssd) finds the catalog and the tape consistent and appends over the remains.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from test_backend_contract import reset_vm_library

from tssd.backends.base import ReadItem, WriteItem
from tssd.backends.scsi.library import ScsiLibrary
from tssd.clock import RealClock
from tssd.config import ScsiSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.errors import TransientBackendError, TssdError
from tssd.files import FileSink, FileSource

VM = json.loads(Path(os.environ["TSSD_SCSI_VM"]).read_text())
WORK = Path("/tmp/faults")
DB = f"sqlite+aiosqlite:///{WORK / 'tssd.db'}"
SLOT_ADDR, CHANGER_LUN = 1024, 3  # guest.sh: first storage address, changer LUN (2 drives)


def report(name: str, **fields: object) -> None:
    print(f"FAULT {name} " + json.dumps(fields), flush=True)


def tgtadm(params: str, lun: int = CHANGER_LUN) -> None:
    subprocess.run(
        [
            *("tgtadm", "--lld", "iscsi", "--mode", "logicalunit", "--op", "update"),
            *("--tid", "1", "--lun", str(lun), "--params", params),
        ],
        check=True,
    )


def library(engine: AsyncEngine) -> ScsiLibrary:
    settings = ScsiSettings(
        changer=VM["changer"],
        mtx="mtx",
        drives=VM["drives"],
        device_layer="st",
        block_size=8192,
        tape_capacity=16 << 20,
        volumes="^TSS",
    )
    return ScsiLibrary(settings, ScsiCatalogTables(session_factory(engine)), RealClock())


def outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    kind = "transient" if isinstance(exc, TransientBackendError) else "permanent"
    return f"{type(exc).__name__}/{kind}: {exc}"


async def attempt(coro: object) -> str:
    try:
        await coro  # type: ignore[misc]
    except TssdError as exc:
        return outcome(exc)
    return "ok"


def payload(name: str, size: int) -> FileSource:
    path = WORK / name
    path.write_bytes(os.urandom(size))
    return FileSource(path, size)


async def removed_and_offline() -> None:
    engine = create_engine(DB)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    async with library(engine) as lib:
        d0, d1 = [d.name for d in await lib.drives()]
        tgtadm(f"element_type=2,address={SLOT_ADDR + 2},clear_slot=1")  # TSS003L8 gone
        gone = await attempt(lib.mount(d0, "TSS003L8"))
        tgtadm(f"element_type=2,address={SLOT_ADDR + 2},barcode=TSS003L8,sides=1")
        back = await attempt(lib.mount(d0, "TSS003L8"))
        report("removed", while_gone=gone, put_back=back)

        await lib.mount(d1, "TSS004L8")
        tgtadm("online=0", lun=2)
        item = WriteItem("0000" + "A" * 32, "atlas:tape", payload("o", 10_000))
        try:
            results = [r async for r in lib.write(d1, [item])]
            offline = outcome(results[0].error)
        except TssdError as exc:
            offline = outcome(exc)
        tgtadm("online=1", lun=2)
        await lib.dismount(d1)
        again = await attempt(lib.mount(d1, "TSS004L8"))
        report("offline", write=offline, remount=again)
        await lib.dismount(d0)
        await lib.dismount(d1)
    await engine.dispose()


class Stalling(FileSource):
    """A source that delivers some data, then hangs: the process is killed mid-object."""

    async def chunks(self) -> AsyncIterator[bytes]:
        yield b"x" * 65536
        print("MIDWRITE", flush=True)
        await asyncio.sleep(3600)


async def writer() -> None:
    """The process that is killed: writes object A, then hangs inside object B."""
    engine = create_engine(DB)
    async with library(engine) as lib:
        d0 = (await lib.drives())[0].name
        await lib.mount(d0, "TSS005L8")
        a = WriteItem("0000" + "A" * 32, "atlas:tape", payload("a", 30_000))
        b = WriteItem("0000" + "B" * 32, "atlas:tape", Stalling(WORK / "a", 1 << 20), "00000001")
        async for result in lib.write(d0, [a, b]):
            print("WROTE", result.item.pnfsid, result.error, flush=True)


async def killed() -> None:
    child = subprocess.Popen(
        [sys.executable, __file__, "writer"], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("MIDWRITE"):
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    engine = create_engine(DB)
    async with library(engine) as lib:
        d0 = (await lib.drives())[0].name
        loaded = {d.name: d.volume for d in await lib.drives()}
        before = await lib.locate(["0000" + "A" * 32, "0000" + "B" * 32])
        await lib.mount(d0, "TSS005L8")
        c = WriteItem("0000" + "C" * 32, "atlas:tape", payload("c", 20_000))
        written = [r async for r in lib.write(d0, [c])]
        copies = await lib.locate(["0000" + "A" * 32, "0000" + "C" * 32])
        reads = []
        for pnfsid in sorted(copies):
            sink = FileSink(WORK / f"read-{pnfsid}")
            async for r in lib.read(d0, [ReadItem(copies[pnfsid][0], sink)]):
                reads.append([pnfsid, r.error is None, r.adler32])
        await lib.dismount(d0)
    await engine.dispose()
    report(
        "killed",
        child=lines,
        loaded_after_restart=loaded,
        catalog_before=sorted(before),
        c_error=str(written[0].error) if written[0].error else None,
        positions={p: cs[0].position for p, cs in copies.items()},
        reads=reads,
        same=[
            (WORK / f"read-{p}").read_bytes() == (WORK / ("a" if "A" in p else "c")).read_bytes()
            for p in sorted(copies)
        ],
    )


async def main() -> None:
    reset_vm_library(VM)
    WORK.mkdir(exist_ok=True)
    await removed_and_offline()
    await killed()


if __name__ == "__main__":
    if sys.argv[1:] == ["writer"]:
        asyncio.run(writer())
    else:
        asyncio.run(main())

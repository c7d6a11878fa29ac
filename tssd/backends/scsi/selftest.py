"""The self-test of a SCSI library: inventory, load, write, locate, read back, verify and
unload one scratch tape, reporting each step (``tssctl backend selftest``).

It drives the library with the backend's own parts (changer, device layer, on-tape
format) but writes nothing to the catalog: it is meant for commissioning a library
(mhVTL or hardware) before tssd uses it, with the daemon stopped. The tape it writes gets
a ``SELFTEST:`` label, which tssd treats as scratch; a tape carrying a real tssd label
is refused because it may hold data.
"""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tssd.backends.scsi.changer import Changer
from tssd.backends.scsi.devices import DriveSpec, opener, resolve_drives
from tssd.backends.scsi.format import FIRST_OBJECT_BLOCK, VolumeLabel
from tssd.backends.scsi.inventory import Inventory
from tssd.backends.scsi.objects import read_label, write_label
from tssd.backends.scsi.tapedev import DriveNotReady, Tape
from tssd.config import ScsiSettings
from tssd.errors import TssdError
from tssd.files import adler32_hex

SELFTEST_PREFIX = "SELFTEST:"


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    ok: bool
    detail: str
    seconds: float


class SelftestError(TssdError):
    """The self-test cannot go on (nothing to test, or a tape that may hold data)."""


@dataclass
class _Run:
    settings: ScsiSettings
    volume: str
    drive_serial: str | None
    objects: int
    ready_timeout_s: float
    changer: Changer = field(init=False)
    drive: DriveSpec | None = None
    slot: int | None = None
    tape: Tape | None = None
    blocks: list[tuple[int, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        s = self.settings
        self.changer = Changer(
            s.mtx, s.changer, move_timeout_s=s.move_timeout_s, status_timeout_s=s.status_timeout_s
        )


async def selftest(
    settings: ScsiSettings,
    volume: str,
    *,
    drive: str | None = None,
    objects: int = 3,
    ready_timeout_s: float = 300.0,
) -> AsyncIterator[Step]:
    """Run the steps in order, stopping at the first failure; always unload at the end."""
    run = _Run(settings, volume, drive, objects, ready_timeout_s)
    steps: list[tuple[str, Callable[[_Run], Awaitable[str]]]] = [
        ("inventory", _inventory),
        ("drives", _drives),
        ("load", _load),
        ("label", _label),
        ("write", _write),
        ("locate+read", _read_back),
    ]
    try:
        for name, fn in steps:
            step = await _timed(name, fn, run)
            yield step
            if not step.ok:
                return
    finally:
        if run.drive is not None and run.slot is not None:
            yield await _timed("unload", _unload, run)


async def _timed(name: str, fn: Callable[[_Run], Awaitable[str]], run: _Run) -> Step:
    started = time.monotonic()
    try:
        detail, ok = await fn(run), True
    except (TssdError, OSError) as exc:
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return Step(name, ok, detail, round(time.monotonic() - started, 3))


async def _inventory(run: _Run) -> str:
    info = await run.changer.inquiry()
    inv: Inventory = await run.changer.status()
    slot = inv.slot_of(run.volume)
    if slot is None:
        raise SelftestError(f"{run.volume} is not in a storage slot (is it in a drive?)")
    run.slot = None  # set once loaded, so that a failed load is not unloaded
    cartridges = len(inv.volumes())
    io = sum(s.import_export for s in inv.slots)
    return (
        f"{info.get('Vendor ID', '?')} {info.get('Product ID', '?')}: {len(inv.drives)} drives, "
        f"{len(inv.slots)} slots ({io} import/export), {cartridges} cartridges; "
        f"{run.volume} in slot {slot.number}"
    )


async def _drives(run: _Run) -> str:
    specs = await asyncio.to_thread(
        resolve_drives, run.settings.drives, run.settings.device_layer, run.settings.changer
    )
    inv = await run.changer.status()
    free = [s for s in specs if (d := inv.drive(s.element)) is not None and not d.full]
    chosen = [s for s in free if run.drive_serial in (None, s.serial)]
    if not chosen:
        raise SelftestError(f"no empty drive among {[s.serial for s in specs]}")
    run.drive = chosen[0]
    listed = ", ".join(f"{s.serial}@{s.element}={s.device}" for s in specs)
    return f"serials checked: {listed}; using {run.drive.serial}"


async def _load(run: _Run) -> str:
    assert run.drive is not None
    inv = await run.changer.status()
    slot = inv.slot_of(run.volume)
    if slot is None:
        raise SelftestError(f"{run.volume} left its slot")
    await run.changer.load(slot.number, run.drive.element)
    run.slot = slot.number
    deadline = time.monotonic() + run.ready_timeout_s
    while True:
        try:
            run.tape = await Tape.open(opener(run.settings.device_layer), run.drive.device)
            break
        except DriveNotReady:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)
    return (
        f"{run.volume} from slot {slot.number} into {run.drive.serial} ({run.drive.device}), ready"
    )


async def _label(run: _Run) -> str:
    assert run.tape is not None
    label = await read_label(run.tape, run.settings.block_size)
    if label is not None and not label.volume.startswith(SELFTEST_PREFIX):
        raise SelftestError(
            f"{run.volume} carries the tssd label of {label.volume}: it may hold data"
        )
    new = VolumeLabel(
        SELFTEST_PREFIX + run.volume, run.settings.block_size, time.strftime("%Y-%m-%dT%H:%M:%S")
    )
    await write_label(run.tape, new)
    before = "blank or foreign" if label is None else "an earlier self-test"
    return f"was {before}; labelled {new.volume} with {new.block_size}-byte blocks"


async def _write(run: _Run) -> str:
    tape, size = run.tape, run.settings.block_size
    assert tape is not None
    # Block ids are counted, not read back (MTIOCPOS): drives like tgt's answer READ
    # POSITION with "block position unknown", and tssd's format never needs it.
    block = FIRST_OBJECT_BLOCK
    for n in range(run.objects):
        data = os.urandom(size * (n + 1) - n * 17)
        blocks = [data[i : i + size].ljust(size, b"\0") for i in range(0, len(data), size)]
        await tape.write_blocks(blocks)
        await tape.write_filemark()
        run.blocks.append((block, data))
        block += len(blocks) + 1
    ids = ", ".join(str(b) for b, _ in run.blocks)
    total = sum(len(d) for _, d in run.blocks)
    return f"{run.objects} objects, {total} bytes, at block ids {ids}"


async def _read_back(run: _Run) -> str:
    tape, size = run.tape, run.settings.block_size
    assert tape is not None
    for fileno, (block, data) in reversed(list(enumerate(run.blocks, start=1))):
        await tape.position(block, fileno)
        count = -(-len(data) // size)
        got = b"".join(await tape.read_blocks(count, size))[: len(data)]
        if await tape.read_block(size) != b"":
            raise SelftestError(f"no filemark after the object at block {block}")
        want, have = adler32_hex(zlib.adler32(data)), adler32_hex(zlib.adler32(got))
        if want != have:
            raise SelftestError(f"block {block}: adler32 {have}, wrote {want}")
    how = tape.positioning.describe()
    return f"located {len(run.blocks)} objects in reverse order ({how}); every adler32 matches"


async def _unload(run: _Run) -> str:
    assert run.drive is not None and run.slot is not None
    if run.tape is not None:
        await run.tape.rewind()
        await run.tape.offline()
        await run.tape.close()
    await run.changer.unload(run.slot, run.drive.element)
    return f"{run.volume} back in slot {run.slot}"


def as_dict(step: Step) -> dict[str, Any]:
    return {"step": step.name, "ok": step.ok, "detail": step.detail, "seconds": step.seconds}

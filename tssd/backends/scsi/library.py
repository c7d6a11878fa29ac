"""``ScsiLibrary``: the :class:`~tssd.backends.base.TapeBackend` of a SCSI tape library.

The changer is driven through ``mtx`` (:mod:`.changer`), the drives through the st driver
or the emulated devices (:mod:`.tapedev`, :mod:`.devices`), data is kept in tssd's format
(:mod:`.format`, :mod:`.objects`) and the catalog in the database (:mod:`.catalog`).

Mounting reads the changer inventory first, so a cartridge someone else left in a drive
(an unexpected tape) is put back before the wanted one is loaded, and a load that hung
is recognised afterwards. Each tssd-labelled tape's label is checked against its barcode
at mount. Writes append at the catalog's end of data; when the drive reports the
early-warning end of medium the tape is closed (marked full) and the write session ends
with :class:`~tssd.backends.scsi.tapedev.EndOfMedium`, so the objects not yet written go
back to the queue and the next session writes them to the next tape.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from tssd.backends.base import (
    DriveInfo,
    ReadItem,
    ReadResult,
    TapeBackend,
    TapeCopy,
    WriteItem,
    WriteResult,
)
from tssd.backends.catalog import ScsiTables
from tssd.backends.records import normalize_adler32
from tssd.backends.scsi import emulated
from tssd.backends.scsi.catalog import Catalog
from tssd.backends.scsi.changer import Changer
from tssd.backends.scsi.devices import DriveSpec, opener, resolve_drives
from tssd.backends.scsi.format import MIN_BLOCK_SIZE, ObjectHeader, VolumeLabel
from tssd.backends.scsi.inventory import Inventory
from tssd.backends.scsi.objects import read_label, write_label
from tssd.backends.scsi.session import read_one, write_one
from tssd.backends.scsi.tapedev import (
    DriveNotReady,
    EndOfMedium,
    MediaError,
    Opener,
    Positioning,
    Tape,
    WriteProtected,
)
from tssd.backends.scsi.wraps import WrapReports, drive_geometry
from tssd.clock import Clock
from tssd.config import ScsiSettings
from tssd.config.storage_classes import StorageClassSettings
from tssd.errors import (
    ConfigError,
    ObjectNotFound,
    PermanentBackendError,
    TransientBackendError,
)
from tssd.tape.geometry import ESTIMATE_SPREAD, MEDIA, Profile, media_profile

log = structlog.get_logger()


@dataclass(slots=True)
class _Drive:
    spec: DriveSpec
    volume: str | None = None
    #: Storage slot the loaded cartridge came from (where it goes back).
    source: int | None = None
    tape: Tape | None = None
    positioning: Positioning = field(default_factory=Positioning)
    wraps: WrapReports = field(default_factory=WrapReports)

    @property
    def name(self) -> str:
        return self.spec.serial


def emulated_settings(settings: ScsiSettings, root: Path) -> ScsiSettings:
    """The settings of an emulated library in *root*, created there if absent."""
    emulated.init_library(
        root,
        drives=settings.emulation_drives,
        tapes=settings.emulation_tapes,
        slots=settings.emulation_tapes + 10,
        capacity=settings.emulation_capacity,
    )
    return ScsiSettings(
        **{
            **settings.__dict__,
            "changer": str(root),
            "mtx": f"{sys.executable} -m tssd.backends.scsi.mtxemu",
            "drives": emulated.drive_spec(root),
            "device_layer": "file",
            "emulation_dir": "",
        }
    )


class ScsiLibrary(TapeBackend):
    name = "scsi"

    def __init__(
        self,
        settings: ScsiSettings,
        tables: ScsiTables,
        clock: Clock,
        storage_classes: tuple[StorageClassSettings, ...] | None = None,
    ) -> None:
        if settings.block_size < MIN_BLOCK_SIZE:
            raise ConfigError(f"scsi.block_size must be at least {MIN_BLOCK_SIZE}")
        if settings.media and settings.media.lower() not in MEDIA:
            raise ConfigError(
                f"scsi.media {settings.media!r} is not one of {', '.join(sorted(MEDIA))}"
            )
        self._settings = settings
        self._catalog = Catalog(tables, storage_classes)
        self._clock = clock
        self._changer = Changer(
            settings.mtx,
            settings.changer,
            move_timeout_s=settings.move_timeout_s,
            status_timeout_s=settings.status_timeout_s,
        )
        self._open_device: Opener = opener(settings.device_layer)
        self._volume_re = re.compile(settings.volumes)
        self._drives: dict[str, _Drive] = {}
        # Volume -> drive for every cartridge in a drive or on its way in or out: set
        # before the first await of a mount so two drives can never claim one volume.
        self._claims: dict[str, str] = {}
        self._present: set[str] = set()
        self._alloc = asyncio.Lock()
        # Per volume, the geometry its drive reported (until the volume is written again).
        self._reports: dict[str, Profile] = {}

    @property
    def changer(self) -> Changer:
        return self._changer

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        specs = await asyncio.to_thread(
            resolve_drives,
            self._settings.drives,
            self._settings.device_layer,
            self._settings.changer,
        )
        inventory = await self.inventory()
        for spec in specs:
            element = inventory.drive(spec.element)
            if element is None:
                raise ConfigError(
                    f"scsi.drives: the changer has no Data Transfer Element {spec.element}"
                )
            drive = _Drive(spec, element.volume, element.source)
            self._drives[spec.serial] = drive
            if element.volume:
                self._claims[element.volume] = spec.serial
        for drive in self._drives.values():
            await self._home_if_unloaded(drive)
        new = await self._catalog.ensure_tapes(
            self._present, self._settings.tape_capacity, self._settings.block_size
        )
        log.info(
            "scsi.library.open",
            changer=self._settings.changer,
            drives=len(self._drives),
            tapes=len(self._present),
            new_tapes=new,
        )

    async def _home_if_unloaded(self, state: _Drive) -> None:
        """A cartridge in *state*'s drive that the drive has unloaded goes back to its slot.

        A stopping tssd gives its unloads ``scheduler.shutdown_unload_s``; one cut short
        after the drive's unload and before the robot's move leaves the cartridge in the
        drive, not loaded, where no read or mount would get past "not ready".
        """
        if state.volume is None:
            return
        try:
            tape = await Tape.open(self._open_device, state.spec.device, state.positioning)
        except DriveNotReady:
            log.warning("scsi.drive.unloaded_at_start", drive=state.name, volume=state.volume)
            try:
                await self.dismount(state.name)
            except (TransientBackendError, PermanentBackendError) as exc:
                log.warning("dismount.failed", drive=state.name, error=str(exc))
            return
        await tape.close()

    async def close(self) -> None:
        for drive in self._drives.values():
            if drive.tape is not None:
                await drive.tape.close()
                drive.tape = None

    async def inventory(self) -> Inventory:
        """Read the changer's inventory and remember which usable cartridges it holds."""
        inventory = await self._changer.status()
        self._present = {v for v in inventory.volumes() if self._volume_re.search(v)}
        return inventory

    def timing(self) -> Profile | None:
        return MEDIA.get(self._settings.media.lower())

    async def geometry(self, volume: str) -> Profile | None:
        """The volume's media type (``scsi.media``, else its barcode suffix) with the wrap
        ends its drive reports once it is mounted (READ END OF WRAP POSITION, :mod:`.wraps`),
        else that type's nominal geometry; copies' offsets are the bytes tssd wrote before
        them (blocks and filemarks)."""
        profile = media_profile(volume, self._settings.media)
        if profile is None:
            return None
        known = self._reports.get(volume)
        if known is None:
            state = next((d for d in self._drives.values() if d.volume == volume), None)
            asked = state and state.tape and state.wraps.supported is not False
            row = await self._catalog.tape(volume) if asked else None
            if state is not None and state.tape is not None and row is not None and row.used:
                first = row.next_block - row.used // row.block_size
                known = await drive_geometry(
                    state.tape, state.name, state.wraps, profile, first, row.block_size
                )
                if known is not None:
                    self._reports[volume] = known
        return known or dataclasses.replace(profile, position_spread=ESTIMATE_SPREAD)

    async def drives(self) -> list[DriveInfo]:
        return [DriveInfo(name=d.name, volume=d.volume) for d in self._drives.values()]

    def positioning(self) -> dict[str, str]:
        """How each drive is positioned (LOCATE, or rewind and space filemarks), by name."""
        return {d.name: d.positioning.describe() for d in self._drives.values()}

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        return await self._catalog.copies(pnfsids)

    def _drive(self, name: str) -> _Drive:
        try:
            return self._drives[name]
        except KeyError:
            raise PermanentBackendError(f"no drive {name} in the SCSI library") from None

    # -- mount and dismount ------------------------------------------------------------

    async def mount(self, drive: str, volume: str) -> None:
        state = self._drive(drive)
        if state.volume == volume:
            await self._checked(state)
            return
        tape = await self._catalog.tape(volume)
        if tape is None or not self._volume_re.search(volume):
            raise PermanentBackendError(f"volume {volume} is not in the library")
        if tape.state != "ok":
            raise PermanentBackendError(f"volume {volume} is disabled: {tape.reason}")
        holder = self._claims.get(volume)
        if holder is not None and holder != drive:
            raise TransientBackendError(f"volume {volume} is in use in {holder}")
        self._claims[volume] = drive
        try:
            await self.dismount(drive)
            await self._load(state, volume)
        except BaseException:
            if state.volume != volume:
                self._claims.pop(volume, None)
            raise
        await self._checked(state)

    async def _checked(self, state: _Drive) -> None:
        try:
            await self._ready(state)
        except PermanentBackendError:
            # Not the cartridge we asked for: it leaves the drive, the drive stays usable.
            await self.dismount(state.name)
            raise

    async def _load(self, state: _Drive, volume: str) -> None:
        inventory = await self.inventory()
        element = inventory.drive(state.spec.element)
        if element is not None and element.full and element.volume != volume:
            await self._put_back(state, inventory, element.volume, element.source)
            inventory = await self.inventory()
        elsewhere = inventory.drive_of(volume)
        if elsewhere is not None and elsewhere.index == state.spec.element:
            # A load that timed out earlier completed after all.
            state.volume, state.source = volume, elsewhere.source
            return
        if elsewhere is not None:
            raise TransientBackendError(
                f"volume {volume} is in Data Transfer Element {elsewhere.index}"
            )
        slot = inventory.slot_of(volume)
        if slot is None:
            raise TransientBackendError(f"volume {volume} is not in a storage slot")
        started = self._clock.now()
        await self._changer.load(slot.number, state.spec.element)
        state.volume, state.source = volume, slot.number
        log.info(
            "scsi.mount.loaded",
            drive=state.name,
            volume=volume,
            slot=slot.number,
            seconds=round(self._clock.now() - started, 3),
        )

    async def _put_back(
        self, state: _Drive, inventory: Inventory, volume: str | None, source: int | None
    ) -> None:
        """Return a cartridge tssd did not load (an operator's, or left by a crash)."""
        empty = inventory.empty_slots()
        slot = source if source in empty else (empty[0] if empty else None)
        log.warning("scsi.drive.unexpected_tape", drive=state.name, volume=volume, to_slot=slot)
        if slot is None:
            raise TransientBackendError(f"no empty slot to put back {volume} from {state.name}")
        await self._changer.unload(slot, state.spec.element)
        if volume:
            self._claims.pop(volume, None)

    async def _ready(self, state: _Drive) -> None:
        """Open the loaded drive and check the cartridge is the one its barcode says."""
        if state.tape is not None or state.volume is None:
            return
        tape = await Tape.open(self._open_device, state.spec.device, state.positioning)
        row = await self._catalog.tape(state.volume)
        if row is not None and row.labelled:
            label = await read_label(tape, row.block_size)
            if label is None or label.volume != state.volume:
                found = label.volume if label else "no tssd label"
                reason = f"barcode {state.volume} but the tape carries {found}"
                await tape.close()
                await self._catalog.close_tape(state.volume, reason, disable=True)
                log.error("scsi.mount.wrong_label", drive=state.name, volume=state.volume)
                raise PermanentBackendError(f"{state.name}: {reason}")
        state.tape = tape

    async def dismount(self, drive: str) -> None:
        state = self._drive(drive)
        volume = state.volume
        if volume is None:
            return
        if state.tape is not None:
            tape, state.tape = state.tape, None
            try:
                await tape.offline()
            except (TransientBackendError, PermanentBackendError) as exc:
                log.warning("scsi.dismount.eject_failed", drive=drive, error=str(exc))
            finally:
                await tape.close()
        inventory = await self.inventory()
        element = inventory.drive(state.spec.element)
        if element is not None and element.full:
            empty = inventory.empty_slots()
            home = state.source or element.source
            slot = home if home in empty else (empty[0] if empty else None)
            if slot is None:
                raise TransientBackendError(f"no empty slot to unload {volume} from {drive}")
            await self._changer.unload(slot, state.spec.element)
        state.volume = state.source = None
        self._claims.pop(volume, None)
        log.info("scsi.dismount.done", drive=drive, volume=volume)

    def _loaded(self, drive: str, volumes: set[str]) -> _Drive:
        state = self._drive(drive)
        if state.volume is None:
            raise TransientBackendError(f"no volume in {drive}")
        wrong = volumes - {state.volume}
        if wrong:
            raise TransientBackendError(
                f"{drive} holds {state.volume}, not {', '.join(sorted(wrong))}"
            )
        return state

    async def _drop_tape(self, state: _Drive) -> None:
        if state.tape is not None:
            tape, state.tape = state.tape, None
            await tape.close()
            log.warning("scsi.drive.not_ready", drive=state.name, volume=state.volume)

    async def _tape(self, state: _Drive) -> Tape:
        await self._ready(state)
        assert state.tape is not None  # _ready opened it or raised
        return state.tape

    # -- read --------------------------------------------------------------------------

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        state = self._loaded(drive, {item.copy.volume for item in items})
        tape = await self._tape(state)
        row = await self._catalog.tape(state.volume or "")
        block_size = row.block_size if row is not None else self._settings.block_size
        for item in items:
            obj = await self._catalog.object(item.copy.bfid)
            try:
                result = await read_one(tape, state.name, obj, item, block_size, self._clock)
            except DriveNotReady:
                await self._drop_tape(state)
                raise
            yield result

    # -- write -------------------------------------------------------------------------

    async def max_object_size(self) -> int | None:
        # A batch spreads over tapes at end of medium; one object never does.
        return await self._catalog.max_capacity() or None

    async def writable_volume(self, storage_class: str, size: int) -> str:
        # Two storage classes asking at once must not both be given the same scratch tape.
        async with self._alloc:
            return await self._catalog.allocate(storage_class, size, self._present)

    async def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        state = self._loaded(drive, set())
        volume = state.volume
        assert volume is not None  # _loaded checked
        tape = await self._tape(state)
        row = await self._catalog.tape(volume)
        if row is None or row.full or row.state != "ok":
            raise EndOfMedium(f"volume {volume} takes no more data")
        block_size = row.block_size
        self._reports.pop(volume, None)
        if not row.labelled:
            label = VolumeLabel(volume, block_size, self._clock.wall().isoformat())
            next_block = await self._guarded(state, volume, write_label(tape, label))
            await self._catalog.labelled(volume, next_block, block_size)
            log.info("scsi.tape.labelled", drive=drive, volume=volume, block_size=block_size)
        for item in items:
            yield await self._guarded(
                state, volume, self._write_item(tape, volume, item, block_size)
            )

    async def _write_item(
        self, tape: Tape, volume: str, item: WriteItem, block_size: int
    ) -> WriteResult:
        row = await self._catalog.tape(volume)
        assert row is not None  # checked by write()
        if row.storage_class not in (None, item.storage_class):
            error = TransientBackendError(
                f"volume {volume} holds storage class {row.storage_class}, not {item.storage_class}"
            )
            return WriteResult(item, error=error)
        header = ObjectHeader(
            bfid=uuid.uuid4().hex,
            pnfsid=item.pnfsid,
            size=item.source.size,
            adler32=normalize_adler32(item.adler32) or "",
            written_at=self._clock.wall().isoformat(),
            storage_class=item.storage_class,
            seq=row.next_seq,
        )
        return await write_one(
            tape, volume, row.next_block, header, item, self._catalog, block_size, self._clock
        )

    async def _guarded(self, state: _Drive, volume: str, step: Any) -> Any:
        """Close the tape for appends when the drive says it is full or unwritable."""
        try:
            return await step
        except DriveNotReady:
            # The drive, not the tape: reopen it at the next use, the tape stays usable.
            await self._drop_tape(state)
            raise
        except EndOfMedium as exc:
            await self._catalog.close_tape(volume, f"end of medium: {exc}")
            log.info("scsi.tape.full", volume=volume)
            raise
        except (WriteProtected, MediaError) as exc:
            await self._catalog.close_tape(volume, str(exc), disable=True)
            log.error("scsi.tape.write_failed", volume=volume, error=str(exc))
            raise

    # -- remove ------------------------------------------------------------------------

    async def remove(self, bfid: str) -> None:
        # Tape space is not reclaimed: the object's blocks stay until the tape is recycled.
        if not await self._catalog.delete(bfid):
            raise ObjectNotFound(f"no object {bfid} in the SCSI library")
        log.info("scsi.remove.done", bfid=bfid)

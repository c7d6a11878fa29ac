"""The simulated tape library: drives, a robot, cartridges and an IBM SP-like catalog.

Catalog and fill state live in the tssd database (:mod:`.catalog`); object bytes live in
``data_dir/objects/<bfid>``. Drive and robot state is kept in memory only: after a
restart every drive is empty, which is what a library reset looks like.

Every hardware delay goes through ``clock.sleep(seconds * time_scale)``, so the same code
runs in real time (``tssd serve``), compressed time (tests, demos) or virtual time
(``tssd simulate``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import structlog

from tssd.backends.base import (
    CopyPlacement,
    DriveInfo,
    ReadItem,
    ReadResult,
    TapeBackend,
    TapeCopy,
    WriteItem,
    WriteResult,
)
from tssd.backends.catalog import SimTables, StoredObject
from tssd.backends.records import normalize_adler32
from tssd.backends.sim.catalog import Catalog, check_room
from tssd.backends.sim.catalog_csv import export_csv, import_csv
from tssd.backends.sim.faults import FaultInjector
from tssd.backends.sim.media import SimDrive, deliver
from tssd.backends.sim.tidy import own_store
from tssd.backends.sim.truth import VolumeKnowledge
from tssd.clock import Clock
from tssd.config import SimSettings
from tssd.config.storage_classes import StorageClassSettings
from tssd.errors import (
    ChecksumMismatch,
    ConfigError,
    Conflict,
    DataError,
    NoSpace,
    ObjectNotFound,
    PermanentBackendError,
    SourceUnreadable,
    TransientBackendError,
)
from tssd.files import FileSink
from tssd.tape.geometry import Profile, get_profile

log = structlog.get_logger()

# IBM SP return codes the simulator reports (IBM's dsmrc.h).
RC_DATA_UNAVAILABLE = 14
RC_MOUNT_NOT_POSSIBLE = 12
RC_WAIT_FOR_SPACE = 26


class SimLibrary(TapeBackend):
    name = "sim"

    def __init__(
        self,
        settings: SimSettings,
        tables: SimTables,
        clock: Clock,
        data_dir: Path,
        *,
        time_scale: float,
        robot_arms: int | None = None,
        storage_classes: tuple[StorageClassSettings, ...] | None = None,
    ) -> None:
        self.profile: Profile = get_profile(settings.profile)
        self._settings = settings
        self._catalog = Catalog(tables, storage_classes)
        self._tables = tables
        self._clock = clock
        self._data_dir = Path(data_dir)
        self._objects = self._data_dir / "objects"
        self._scale = time_scale
        self._capacity = (
            settings.tape_capacity if settings.tape_capacity > 0 else self.profile.capacity_bytes
        )
        names = [f"{settings.drive_prefix}{i}" for i in range(settings.drives)]
        self._drives = {name: SimDrive(name) for name in names}
        # Volume -> drive for every cartridge in a drive or on its way in or out: set
        # before the first await of a mount so two drives can never claim one volume.
        self._claims: dict[str, str] = {}
        # The arms are shared by every drive: mounts and dismounts beyond their number
        # wait for a free arm (contention).
        arms = settings.robot_arms if robot_arms is None else robot_arms
        if arms < 1:
            raise ConfigError(f"sim.robot_arms must be at least 1, not {arms}")
        self._robot = asyncio.Semaphore(arms)
        self._faults = FaultInjector(
            settings.transient_error_rate, settings.permanent_error_rate, settings.seed
        )
        self._alloc = asyncio.Lock()
        self._lock_fd: int | None = None
        # Where each volume's objects truly lie, and what the scheduler is told of it.
        self._known = VolumeKnowledge(self._catalog, self.profile, settings)

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        self._objects.mkdir(parents=True, exist_ok=True)
        tapes = await self._catalog.ensure_tapes(
            self._settings.tapes, self._capacity, self.profile.volume_suffix
        )
        self._lock_fd = await own_store(self._data_dir, self._objects, self._catalog.known_bfids)
        log.info(
            "sim.library.open",
            profile=self.profile.name,
            drives=len(self._drives),
            tapes=tapes,
            data_dir=str(self._data_dir),
        )

    async def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def drives(self) -> list[DriveInfo]:
        return [DriveInfo(name=d.name, volume=d.volume) for d in self._drives.values()]

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        return await self._catalog.copies(pnfsids)

    # -- what a real SP site knows: the media type, sizes and sequence numbers ---------

    def timing(self) -> Profile:
        return self.profile

    async def geometry(self, volume: str) -> Profile | None:
        """What a real SP site's backend could tell (:meth:`VolumeKnowledge.told`): the
        media type's nominal geometry at the volume's own capacity, or with
        ``sim.drive_geometry``, once the volume is in a drive, the wrap ends that drive
        reports (READ END OF WRAP POSITION, :func:`layout.wrap_report`)."""
        in_drive = any(d.volume == volume for d in self._drives.values())
        return await self._known.told(volume, in_drive=in_drive)

    # -- catalog tools -----------------------------------------------------------------

    async def placements(self) -> list[CopyPlacement]:
        return await self._catalog.placements()

    async def import_catalog(self, source: TextIO, *, replace: bool) -> dict[str, Any]:
        if replace and self._claims:
            # Emptying cartridges under a running session would pull objects from it.
            raise Conflict(
                f"cartridges are in drives ({', '.join(sorted(self._claims))}): "
                "replace the catalog when the library is idle, or merge"
            )
        async with self._alloc:
            summary = await import_csv(
                self._tables, source, replace=replace, capacity=self._capacity
            )
            self._known.clear()
        log.info("sim.catalog.imported", **summary)
        return summary

    async def export_catalog(self, target: TextIO) -> int:
        return await export_csv(self._tables, target)

    # -- robot -------------------------------------------------------------------------

    async def _delay(self, seconds: float) -> float:
        scaled = seconds * self._scale
        await self._clock.sleep(scaled)
        return scaled

    def _drive(self, name: str) -> SimDrive:
        try:
            return self._drives[name]
        except KeyError:
            raise PermanentBackendError(f"no drive {name} in the simulated library") from None

    async def mount(self, drive: str, volume: str) -> None:
        state = self._drive(drive)
        if state.volume == volume:
            return
        tape = await self._catalog.tape(volume)
        if tape is None:
            raise PermanentBackendError(f"volume {volume} is not in the library")
        holder = self._claims.get(volume)
        if holder is not None and holder != drive:
            raise TransientBackendError(
                f"volume {volume} is in use in {holder}", code=RC_MOUNT_NOT_POSSIBLE
            )
        fault = self._faults.draw("mount", volume)
        if fault is not None:
            log.warning("sim.mount.failed", drive=drive, volume=volume, code=fault.code)
            raise fault
        self._claims[volume] = drive
        started = self._clock.now()
        try:
            await self.dismount(drive)
            async with self._robot:
                await self._delay(self.profile.robot_s)
            await self._delay(self.profile.load_s)
        except BaseException:
            self._claims.pop(volume, None)
            raise
        state.volume, state.capacity, state.head, state.contiguous = volume, tape.capacity, 0, 0
        log.info("sim.mount.ready", drive=drive, volume=volume, seconds=self._clock.now() - started)

    async def dismount(self, drive: str) -> None:
        state = self._drive(drive)
        volume = state.volume
        if volume is None:
            return
        started = self._clock.now()
        try:
            rewind = self.profile.unload_rewind_s(state.head, state.capacity, state.contiguous)
            await self._delay(rewind)
            state.head, state.contiguous = 0, 0
            await self._delay(self.profile.unload_s)
            async with self._robot:
                await self._delay(self.profile.robot_s)
        finally:
            # Once unloading has begun the cartridge is out of the drive, whatever happens.
            state.volume, state.capacity, state.head = None, 0, 0
            self._claims.pop(volume, None)
        log.info(
            "sim.dismount.done", drive=drive, volume=volume, seconds=self._clock.now() - started
        )

    def _loaded(self, drive: str, volumes: set[str]) -> tuple[SimDrive, str]:
        state = self._drive(drive)
        if state.volume is None:
            raise TransientBackendError(f"no volume in {drive}", code=RC_DATA_UNAVAILABLE)
        wrong = volumes - {state.volume}
        if wrong:
            raise TransientBackendError(
                f"{drive} holds {state.volume}, not {', '.join(sorted(wrong))}",
                code=RC_DATA_UNAVAILABLE,
            )
        return state, state.volume

    # -- read --------------------------------------------------------------------------

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        state, _ = self._loaded(drive, {item.copy.volume for item in items})
        # One catalog query for the batch, not one per file: batches hold thousands.
        objects = await self._catalog.objects([item.copy.bfid for item in items])
        for item in items:
            yield await self._read_one(drive, state, item, objects.get(item.copy.bfid))

    async def _read_one(
        self, drive: str, state: SimDrive, item: ReadItem, obj: StoredObject | None
    ) -> ReadResult:
        try:
            return await self._read_guarded(drive, state, item, obj)
        except BaseException:
            # Session-breaking errors and cancellation: still leave nothing half-written.
            await item.sink.abort()
            raise

    async def _read_guarded(
        self, drive: str, state: SimDrive, item: ReadItem, obj: StoredObject | None
    ) -> ReadResult:
        if obj is None or obj.volume != state.volume:
            await item.sink.abort()
            err = ObjectNotFound(f"no object {item.copy.bfid} on {state.volume}")
            return self._read_failed(drive, item, err)
        fault = self._faults.draw("read", obj.pnfsid)
        if fault is not None:
            await item.sink.abort()
            return self._read_failed(drive, item, fault)
        start, end = await self._known.span(obj.volume, obj.offset, obj.size)
        locate_s = await self._delay(self.profile.locate_s(state.head, start, state.capacity))
        await self._delay(self.profile.per_file_s)
        transfer_s = await self._delay(self.profile.transfer_s(obj.size))
        state.move(start, end)
        try:
            nbytes, adler = await deliver(self._objects, obj, item.sink)
        except (DataError, PermanentBackendError) as exc:
            error: Exception = exc
            if isinstance(exc, PermanentBackendError) and await self._removed(obj):
                # Removed after the batch was looked up: gone, not a media error (health).
                error = ObjectNotFound(f"{obj.pnfsid}: {obj.bfid} was removed while being read")
            return self._read_failed(drive, item, error, locate_s, transfer_s)
        log.debug(
            "sim.read.file", drive=drive, volume=state.volume, pnfsid=obj.pnfsid, nbytes=nbytes
        )
        return ReadResult(item, nbytes, adler, locate_s=locate_s, transfer_s=transfer_s)

    async def _removed(self, obj: StoredObject) -> bool:
        """Whether the catalog no longer holds *obj* (a removal raced its read)."""
        return obj.bfid not in await self._catalog.objects([obj.bfid])

    def _read_failed(
        self,
        drive: str,
        item: ReadItem,
        error: Exception,
        locate_s: float = 0.0,
        transfer_s: float = 0.0,
    ) -> ReadResult:
        log.warning(
            "sim.read.failed",
            drive=drive,
            volume=item.copy.volume,
            pnfsid=item.copy.pnfsid,
            error=str(error),
            error_type=type(error).__name__,
        )
        return ReadResult(item, locate_s=locate_s, transfer_s=transfer_s, error=error)

    # -- write -------------------------------------------------------------------------

    async def max_object_size(self) -> int | None:
        return await self._catalog.max_capacity() or None

    async def writable_volume(self, storage_class: str, size: int) -> str:
        async with self._alloc:
            return await self._catalog.allocate(storage_class, size)

    async def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        state, volume = self._loaded(drive, set())
        for item in items:
            yield await self._write_one(drive, state, volume, item)

    async def _write_one(
        self, drive: str, state: SimDrive, volume: str, item: WriteItem
    ) -> WriteResult:
        fault = self._faults.draw("write", item.pnfsid)
        if fault is not None:
            return self._write_failed(drive, item, fault)
        expected = normalize_adler32(item.adler32)
        size = item.source.size
        if expected is not None:
            existing = await self._catalog.find_copy(item.pnfsid, size, expected)
            if existing is not None:
                return self._already_on_tape(drive, item, existing)
        try:
            await self._check_room(volume, item.storage_class, size)
            bfid = uuid.uuid4().hex
            nbytes, adler = await self._copy_in(item, bfid)
        except (DataError, PermanentBackendError, TransientBackendError) as exc:
            return self._write_failed(drive, item, exc)
        if expected is not None and adler != expected:
            await self._discard(bfid)
            err = ChecksumMismatch(f"{item.pnfsid}: source adler32 {adler}, expected {expected}")
            return self._write_failed(drive, item, err)
        existing = await self._catalog.find_copy(item.pnfsid, nbytes, adler)
        if existing is not None:
            await self._discard(bfid)
            return self._already_on_tape(drive, item, existing)
        # Appending starts at the (physical) end of data, wherever reads left the head.
        _, physical_end = await self._known.layout(volume)
        await self._delay(self.profile.locate_s(state.head, physical_end, state.capacity))
        await self._delay(self.profile.per_file_s)
        transfer_s = await self._delay(self.profile.transfer_s(nbytes))
        try:
            copy = await self._record(volume, item, bfid, nbytes, adler)
        except (PermanentBackendError, TransientBackendError) as exc:
            await self._discard(bfid)
            return self._write_failed(drive, item, exc)
        if copy.bfid != bfid:
            await self._discard(bfid)
            return self._already_on_tape(drive, item, copy)
        self._known.written(volume)
        start, end = await self._known.span(volume, copy.offset, nbytes)
        state.move(start, end)
        log.debug(
            "sim.write.file",
            drive=drive,
            volume=volume,
            pnfsid=item.pnfsid,
            bfid=bfid,
            seq=copy.position,
            nbytes=nbytes,
        )
        return WriteResult(item, copy=copy, transfer_s=transfer_s)

    async def _check_room(self, volume: str, storage_class: str, size: int) -> int:
        """Refuse early what the tape cannot take; return its end of data."""
        tape = await self._catalog.tape(volume)
        if tape is None:
            raise PermanentBackendError(f"volume {volume} is not in the library")
        check_room(tape, storage_class, size)
        return tape.used

    async def _copy_in(self, item: WriteItem, bfid: str) -> tuple[int, str]:
        sink = FileSink(self._objects / bfid)
        try:
            async for data in item.source.chunks():
                await sink.write(data)
            if sink.nbytes != item.source.size:
                raise SourceUnreadable(
                    f"{item.pnfsid}: read {sink.nbytes} bytes, expected {item.source.size}"
                )
            return await sink.commit()
        except SourceUnreadable:
            raise
        except NoSpace as exc:
            raise TransientBackendError(
                f"simulated library store is full: {exc}", code=RC_WAIT_FOR_SPACE
            ) from exc
        except DataError as exc:
            # Our own store failing is the "tape" failing: another volume may do.
            raise TransientBackendError(f"simulated media write error: {exc}") from exc
        finally:
            await sink.abort()

    async def _record(
        self, volume: str, item: WriteItem, bfid: str, nbytes: int, adler: str
    ) -> TapeCopy:
        async with self._alloc:
            # Checked again under the allocation lock: two writers of one file (two tssd
            # instances, or a retry racing its original) record one copy, not two.
            existing = await self._catalog.find_copy(item.pnfsid, nbytes, adler)
            if existing is not None:
                return existing
            return await self._catalog.record(
                volume,
                bfid=bfid,
                pnfsid=item.pnfsid,
                storage_class=item.storage_class,
                size=nbytes,
                adler32=adler,
                written_at=self._clock.wall(),
            )

    def _already_on_tape(self, drive: str, item: WriteItem, copy: TapeCopy) -> WriteResult:
        log.info(
            "sim.write.exists",
            drive=drive,
            volume=copy.volume,
            pnfsid=item.pnfsid,
            bfid=copy.bfid,
        )
        return WriteResult(item, copy=copy)

    def _write_failed(self, drive: str, item: WriteItem, error: Exception) -> WriteResult:
        log.warning(
            "sim.write.failed",
            drive=drive,
            pnfsid=item.pnfsid,
            error=str(error),
            error_type=type(error).__name__,
        )
        return WriteResult(item, error=error)

    async def _discard(self, bfid: str) -> None:
        await asyncio.to_thread((self._objects / bfid).unlink, missing_ok=True)

    # -- remove ------------------------------------------------------------------------

    async def remove(self, bfid: str) -> None:
        if not await self._catalog.delete(bfid):
            raise ObjectNotFound(f"no object {bfid} in the simulated library")
        await self._discard(bfid)
        log.info("sim.remove.done", bfid=bfid)

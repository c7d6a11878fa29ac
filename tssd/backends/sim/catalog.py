"""The simulated library's catalog: tables ``sim_tapes`` and ``sim_objects``.

It plays the part of the IBM SP server database. Database errors are translated into
:class:`~tssd.errors.TransientBackendError` here, as a real backend would report a server
it cannot reach.
"""

from __future__ import annotations

from datetime import datetime

from tssd.backends.base import CopyPlacement, TapeCopy
from tssd.backends.catalog import SimCartridge, SimTables
from tssd.backends.records import ObjectCatalog, to_copy
from tssd.config.storage_classes import StorageClassSettings, claim_guard
from tssd.errors import PermanentBackendError, TooLargeForTape, TransientBackendError

#: IBM SP "communication failure": the catalog database did not answer.
RC_COMM_FAILURE = -50


def volume_name(index: int, suffix: str) -> str:
    """Six-character volume serial plus the media suffix (``SIM000L9``)."""
    serial = f"SIM{index:03d}" if index < 1000 else f"S{index:05d}"
    return serial + suffix


class Catalog(ObjectCatalog):
    unavailable = "simulated catalog unavailable"
    error_code = RC_COMM_FAILURE

    def __init__(
        self, tables: SimTables, storage_classes: tuple[StorageClassSettings, ...] | None = None
    ) -> None:
        super().__init__(tables)
        self._tables = tables
        #: Which classes may claim empty cartridges, and how many (None: any, unbounded).
        self._classes = storage_classes

    async def ensure_tapes(self, count: int, capacity: int, suffix: str) -> int:
        """Create *count* scratch cartridges unless the library has some; return how many."""
        volumes = [volume_name(i, suffix) for i in range(count)]
        with self._guard():
            return await self._tables.ensure_tapes(volumes, capacity)

    async def tape(self, volume: str) -> SimCartridge | None:
        with self._guard():
            return await self._tables.tape(volume)

    async def layout(self, volume: str) -> list[tuple[int, int, int]]:
        """(seq, offset, size) of every object on *volume*, in sequence order."""
        with self._guard():
            return await self._tables.layout(volume)

    async def placements(self) -> list[CopyPlacement]:
        with self._guard():
            rows = await self._tables.placements()
        return [
            CopyPlacement(pnfsid, volume, seq, size, written_at)
            for pnfsid, volume, seq, size, written_at in rows
        ]

    async def known_bfids(self, bfids: list[str]) -> set[str]:
        """The bfids among *bfids* that the catalog records."""
        with self._guard():
            return await self._tables.known_bfids(bfids)

    async def max_capacity(self) -> int:
        with self._guard():
            return await self._tables.max_capacity()

    async def allocate(self, storage_class: str, size: int) -> str:
        """A filling tape of *storage_class* with room, else a scratch tape assigned to it.

        The simulated library writes a batch to one tape: a batch larger than the largest
        tape can never be placed (TooLargeForTape), unlike one that waits for room.
        """
        largest = await self.max_capacity()
        if size > largest:
            raise TooLargeForTape(f"{size} bytes: no tape of the library holds more than {largest}")
        with self._guard():
            guard = claim_guard(self._classes, storage_class)
            volume = await self._tables.assign_tape(storage_class, size, guard)
        if volume is None:
            raise PermanentBackendError(
                f"library full: no tape has {size} bytes free for {storage_class}"
            )
        return volume

    async def record(
        self,
        volume: str,
        *,
        bfid: str,
        pnfsid: str,
        storage_class: str,
        size: int,
        adler32: str,
        written_at: datetime,
    ) -> TapeCopy:
        """Append one object to *volume* and advance the tape, in one transaction."""
        with self._guard():
            obj = await self._tables.append(
                volume,
                lambda tape: check_room(tape, storage_class, size),
                bfid=bfid,
                pnfsid=pnfsid,
                size=size,
                adler32=adler32,
                storage_class=storage_class,
                written_at=written_at,
                has_data=True,
            )
        if obj is None:
            raise PermanentBackendError(f"volume {volume} does not exist")
        return to_copy(obj)


def check_room(tape: SimCartridge, storage_class: str, size: int) -> None:
    """Refuse an append the tape cannot take; another volume may, so it is transient."""
    if tape.storage_class not in (None, storage_class):
        raise TransientBackendError(
            f"volume {tape.volume} holds storage class {tape.storage_class}, not {storage_class}"
        )
    if tape.full or tape.used + size > tape.capacity:
        raise TransientBackendError(f"volume {tape.volume} has no room for {size} bytes")

"""The SCSI library's catalog in the tssd database: ``scsi_tapes`` and ``scsi_objects``.

A tape row is created for every cartridge the changer inventory shows; an object row is
written only after the object's filemark is on tape, so the catalog never names data the
tape does not hold. Database errors become :class:`~tssd.errors.TransientBackendError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from tssd.backends.base import TapeCopy
from tssd.backends.catalog import ScsiCartridge, ScsiTables
from tssd.backends.records import ObjectCatalog, to_copy
from tssd.config.storage_classes import StorageClassSettings, claim_guard
from tssd.errors import PermanentBackendError


def _usable(tape: ScsiCartridge, present: set[str]) -> bool:
    return tape.volume in present and tape.state == "ok" and not tape.full


def choose(tapes: Sequence[ScsiCartridge], storage_class: str, size: int) -> ScsiCartridge | None:
    """Filling tape with room, else scratch with room, else the fullest filling tape
    with any room or any scratch (a batch larger than one tape rolls over to the next)."""
    filling = sorted(
        (t for t in tapes if t.storage_class == storage_class and t.capacity > t.used),
        key=lambda t: (-t.used, t.volume),
    )
    scratch = sorted(
        (t for t in tapes if t.storage_class is None and t.used == 0), key=lambda t: t.volume
    )
    free = sum(t.capacity - t.used for t in filling) + sum(t.capacity for t in scratch)
    if size > free:
        return None
    for tape in filling:
        if tape.capacity - tape.used >= size:
            return tape
    for tape in scratch:
        if tape.capacity >= size:
            return tape
    rest = filling or scratch
    return rest[0] if rest else None


class Catalog(ObjectCatalog):
    unavailable = "SCSI library catalog unavailable"

    def __init__(
        self, tables: ScsiTables, storage_classes: tuple[StorageClassSettings, ...] | None = None
    ) -> None:
        super().__init__(tables)
        self._tables = tables
        #: Which classes may claim empty cartridges, and how many (None: any, unbounded).
        self._classes = storage_classes

    async def ensure_tapes(self, volumes: Iterable[str], capacity: int, block_size: int) -> int:
        """Add the cartridges the catalog does not know yet; return how many were new."""
        with self._guard():
            return await self._tables.add_tapes(volumes, capacity, block_size)

    async def tape(self, volume: str) -> ScsiCartridge | None:
        with self._guard():
            return await self._tables.tape(volume)

    async def max_capacity(self) -> int:
        with self._guard():
            return await self._tables.max_capacity()

    async def allocate(self, storage_class: str, size: int, present: set[str]) -> str:
        guard = claim_guard(self._classes, storage_class)

        def pick(tapes: Sequence[ScsiCartridge]) -> ScsiCartridge | None:
            tape = choose([t for t in tapes if _usable(t, present)], storage_class, size)
            if tape is not None and tape.storage_class is None and guard is not None:
                guard(dict(Counter(t.storage_class for t in tapes)))
            return tape

        with self._guard():
            volume = await self._tables.assign_tape(storage_class, pick)
        if volume is None:
            raise PermanentBackendError(
                f"library full: the tapes have less than {size} bytes free for {storage_class}"
            )
        return volume

    async def labelled(self, volume: str, next_block: int, block_size: int) -> None:
        with self._guard():
            known = await self._tables.mark_labelled(volume, next_block, block_size)
        if not known:
            raise PermanentBackendError(f"volume {volume} is not in the catalog")

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
        block: int,
        blocks: int,
    ) -> TapeCopy:
        """Add one object written at *block* and move the tape's end of data past it."""
        with self._guard():
            obj = await self._tables.append(
                volume,
                block=block,
                blocks=blocks,
                bfid=bfid,
                pnfsid=pnfsid,
                size=size,
                adler32=adler32,
                storage_class=storage_class,
                written_at=written_at,
            )
        if obj is None:
            raise PermanentBackendError(f"volume {volume} is not in the catalog")
        return to_copy(obj)

    async def close_tape(self, volume: str, reason: str, *, disable: bool = False) -> None:
        """No more appends to *volume* (end of medium); *disable* also stops its use."""
        with self._guard():
            await self._tables.close_tape(volume, reason, disable=disable)

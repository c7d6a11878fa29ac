"""The SCSI library's catalog in the tssd database: ``scsi_tapes`` and ``scsi_objects``.

A tape row is created for every cartridge the changer inventory shows; an object row is
written only after the object's filemark is on tape, so the catalog never names data the
tape does not hold. Database errors become :class:`~tssd.errors.TransientBackendError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import func, select

from tssd.backends.base import TapeCopy
from tssd.backends.records import ObjectCatalog, to_copy
from tssd.db.models import ScsiObject, ScsiTape
from tssd.errors import PermanentBackendError

#: Bound parameters per IN list: far below SQLite's and PostgreSQL's limits.


def _usable(tape: ScsiTape, present: set[str]) -> bool:
    return tape.volume in present and tape.state == "ok" and not tape.full


def choose(tapes: Sequence[ScsiTape], storage_class: str, size: int) -> ScsiTape | None:
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
    model = ScsiObject
    unavailable = "SCSI library catalog unavailable"

    async def ensure_tapes(self, volumes: Iterable[str], capacity: int, block_size: int) -> int:
        """Add the cartridges the catalog does not know yet; return how many were new."""
        wanted = set(volumes)
        async with self._session() as session, session.begin():
            known = set(await session.scalars(select(ScsiTape.volume)))
            new = sorted(wanted - known)
            session.add_all(
                ScsiTape(
                    volume=v,
                    capacity=capacity,
                    used=0,
                    block_size=block_size,
                    next_block=0,
                    next_seq=1,
                    labelled=False,
                    full=False,
                    state="ok",
                )
                for v in new
            )
        return len(new)

    async def tape(self, volume: str) -> ScsiTape | None:
        async with self._session() as session:
            return await session.get(ScsiTape, volume)

    async def max_capacity(self) -> int:
        async with self._session() as session:
            return int(await session.scalar(select(func.max(ScsiTape.capacity))) or 0)

    async def allocate(self, storage_class: str, size: int, present: set[str]) -> str:
        async with self._session() as session, session.begin():
            tapes = [t for t in await session.scalars(select(ScsiTape)) if _usable(t, present)]
            tape = choose(tapes, storage_class, size)
            if tape is None:
                raise PermanentBackendError(
                    f"library full: the tapes have less than {size} bytes free for {storage_class}"
                )
            tape.storage_class = storage_class
            return tape.volume

    async def labelled(self, volume: str, next_block: int, block_size: int) -> None:
        async with self._session() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is None:
                raise PermanentBackendError(f"volume {volume} is not in the catalog")
            tape.labelled, tape.next_block, tape.block_size = True, next_block, block_size

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
        async with self._session() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is None:
                raise PermanentBackendError(f"volume {volume} is not in the catalog")
            obj = ScsiObject(
                bfid=bfid,
                pnfsid=pnfsid,
                volume=volume,
                seq=tape.next_seq,
                block=block,
                offset=tape.used,
                size=size,
                adler32=adler32,
                storage_class=storage_class,
                written_at=written_at,
            )
            session.add(obj)
            tape.storage_class = storage_class
            tape.next_seq += 1
            tape.next_block = block + blocks
            tape.used += blocks * tape.block_size
            return to_copy(obj)

    async def close_tape(self, volume: str, reason: str, *, disable: bool = False) -> None:
        """No more appends to *volume* (end of medium); *disable* also stops its use."""
        async with self._session() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is not None:
                tape.full, tape.reason = True, reason
                if disable:
                    tape.state = "disabled"

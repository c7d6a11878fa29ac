"""The SCSI library's catalog tables, ``scsi_tapes`` and ``scsi_objects``.

:mod:`tssd.backends.scsi.catalog` decides which tape takes a write and translates
errors; the queries and their transactions are here, behind the interface
:class:`tssd.backends.catalog.ScsiTables`: what leaves is records, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import func, select

from tssd.backends.catalog import ScsiCartridge, StoredObject
from tssd.db.engine import Sessions
from tssd.db.models import ScsiObject, ScsiTape
from tssd.db.tape_catalog import ObjectTable, scsi_object, translated


class ScsiCatalogTables(ObjectTable):
    """``scsi_tapes`` and ``scsi_objects``; each method is one transaction or one read."""

    def __init__(self, sessions: Sessions) -> None:
        super().__init__(sessions, ScsiObject, scsi_object)

    @translated
    async def add_tapes(self, volumes: Iterable[str], capacity: int, block_size: int) -> int:
        """Add the cartridges the catalog does not know yet; return how many were new."""
        wanted = set(volumes)
        async with self.sessions() as session, session.begin():
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

    @translated
    async def tape(self, volume: str) -> ScsiCartridge | None:
        async with self.sessions() as session:
            tape = await session.get(ScsiTape, volume)
            return None if tape is None else cartridge(tape)

    @translated
    async def max_capacity(self) -> int:
        async with self.sessions() as session:
            return int(await session.scalar(select(func.max(ScsiTape.capacity))) or 0)

    @translated
    async def assign_tape(
        self,
        storage_class: str,
        pick: Callable[[Sequence[ScsiCartridge]], ScsiCartridge | None],
    ) -> str | None:
        """The tape *pick* chooses among all, assigned to *storage_class*; None if none."""
        async with self.sessions() as session, session.begin():
            tapes = {t.volume: t for t in await session.scalars(select(ScsiTape))}
            chosen = pick([cartridge(t) for t in tapes.values()])
            if chosen is None:
                return None
            tapes[chosen.volume].storage_class = storage_class
            return chosen.volume

    @translated
    async def mark_labelled(self, volume: str, next_block: int, block_size: int) -> bool:
        """Record *volume*'s label and where data begins; False if it is not catalogued."""
        async with self.sessions() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is None:
                return False
            tape.labelled, tape.next_block, tape.block_size = True, next_block, block_size
            return True

    @translated
    async def append(
        self, volume: str, *, block: int, blocks: int, **values: Any
    ) -> StoredObject | None:
        """Add one object written at *block* and move the tape's end of data past it, in
        one transaction that locks the tape's row; None if it is not catalogued."""
        async with self.sessions() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is None:
                return None
            obj = ScsiObject(
                volume=volume, seq=tape.next_seq, block=block, offset=tape.used, **values
            )
            session.add(obj)
            tape.storage_class = values["storage_class"]
            tape.next_seq += 1
            tape.next_block = block + blocks
            tape.used += blocks * tape.block_size
            return scsi_object(obj)

    @translated
    async def close_tape(self, volume: str, reason: str, *, disable: bool = False) -> None:
        """No more appends to *volume* (end of medium); *disable* also stops its use."""
        async with self.sessions() as session, session.begin():
            tape = await session.get(ScsiTape, volume, with_for_update=True)
            if tape is not None:
                tape.full, tape.reason = True, reason
                if disable:
                    tape.state = "disabled"


def cartridge(tape: ScsiTape) -> ScsiCartridge:
    """The record of a ``scsi_tapes`` row."""
    return ScsiCartridge(
        tape.volume, tape.storage_class, tape.capacity, tape.used, tape.block_size,
        tape.next_block, tape.next_seq, tape.labelled, tape.full, tape.state, tape.reason,
    )  # fmt: skip

"""The simulated library's catalog tables, ``sim_tapes`` and ``sim_objects``.

:mod:`tssd.backends.sim.catalog` decides (which tape, whether there is room) and
translates errors; :mod:`tssd.backends.sim.catalog_csv` parses and merges a catalog CSV.
The queries and their transactions are here, behind the interface
:class:`tssd.backends.catalog.SimTables`: what leaves is records, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from tssd.backends.catalog import (
    ByVolume,
    ClaimGuard,
    ImportPlan,
    SimCartridge,
    StoredObject,
    TapeFill,
)
from tssd.db.engine import Sessions, reading
from tssd.db.models import SimObject, SimTape
from tssd.db.statistics import analyse
from tssd.db.tape_catalog import ObjectTable, chunks, sim_object, translated

#: Rows per executemany batch of the import.
INSERT_BATCH = 10_000
OBJECTS = cast(Table, SimObject.__table__)


class SimCatalogTables(ObjectTable):
    """``sim_tapes`` and ``sim_objects``; each method is one transaction or one read."""

    def __init__(self, sessions: Sessions) -> None:
        super().__init__(sessions, SimObject, sim_object)

    @translated
    async def ensure_tapes(self, volumes: Sequence[str], capacity: int) -> int:
        """Create *volumes* as scratch cartridges unless the library has some; return
        how many it has."""
        async with self.sessions() as session, session.begin():
            existing = await session.scalar(select(func.count()).select_from(SimTape))
            if existing:
                return int(existing)
            session.add_all(SimTape(volume=v, capacity=capacity) for v in volumes)
        return len(volumes)

    @translated
    async def tape(self, volume: str) -> SimCartridge | None:
        """The tape's row (read at every mount: core SQL)."""
        return await reading(self.sessions.kw["bind"], _tape, volume)

    @translated
    async def layout(self, volume: str) -> list[tuple[int, int, int]]:
        """(seq, offset, size) of every object on *volume*, in sequence order."""
        stmt = (
            select(SimObject.seq, SimObject.offset, SimObject.size)
            .where(SimObject.volume == volume)
            .order_by(SimObject.seq)
        )
        async with self.sessions() as session:
            return [(seq, offset, size) for seq, offset, size in await session.execute(stmt)]

    @translated
    async def placements(self) -> list[tuple[str, str, int, int, datetime]]:
        """(pnfsid, volume, seq, size, written_at) of every object."""
        columns = (
            SimObject.pnfsid,
            SimObject.volume,
            SimObject.seq,
            SimObject.size,
            SimObject.written_at,
        )
        async with self.sessions() as session:
            result = await session.execute(select(*columns))
            return [(p, v, seq, size, at) for p, v, seq, size, at in result]

    async def known_bfids(self, bfids: list[str]) -> set[str]:
        """The bfids among *bfids* that the catalog records."""
        return {row.bfid for row in await self.with_bfids(bfids)}

    @translated
    async def max_capacity(self) -> int:
        async with self.sessions() as session:
            return int(await session.scalar(select(func.max(SimTape.capacity))) or 0)

    @translated
    async def assign_tape(
        self,
        storage_class: str,
        size: int,
        may_claim: ClaimGuard | None = None,
    ) -> str | None:
        """A filling tape of *storage_class* with room, else a scratch tape assigned to
        it; None if there is neither. Before a scratch tape is assigned, *may_claim* is
        given the tapes each class holds, and raises to refuse (nothing changed)."""
        async with self.sessions() as session, session.begin():
            filling = await session.scalar(
                select(SimTape)
                .where(
                    SimTape.storage_class == storage_class,
                    SimTape.full.is_(False),
                    SimTape.capacity - SimTape.used >= size,
                )
                .order_by(SimTape.used.desc(), SimTape.volume)
                .limit(1)
            )
            if filling is not None:
                return filling.volume
            if may_claim is not None:
                counts = select(SimTape.storage_class, func.count()).group_by(SimTape.storage_class)
                may_claim({sc: n for sc, n in (await session.execute(counts)).all()})
            scratch = await session.scalar(
                select(SimTape)
                .where(
                    SimTape.storage_class.is_(None),
                    SimTape.used == 0,
                    SimTape.capacity >= size,
                )
                .order_by(SimTape.volume)
                .limit(1)
            )
            if scratch is None:
                return None
            scratch.storage_class = storage_class
            return scratch.volume

    @translated
    async def append(
        self, volume: str, check: Callable[[SimCartridge], None], **values: Any
    ) -> StoredObject | None:
        """Append one object to *volume* and advance the tape, in one transaction that
        locks the tape's row; *check* (on the locked row) raises to refuse. None if
        there is no such volume."""
        async with self.sessions() as session, session.begin():
            tape = await session.get(SimTape, volume, with_for_update=True)
            if tape is None:
                return None
            check(cartridge(tape))
            obj = SimObject(volume=volume, seq=tape.next_seq, offset=tape.used, **values)
            session.add(obj)
            tape.storage_class = values["storage_class"]
            tape.next_seq += 1
            tape.used += values["size"]
            tape.full = tape.used >= tape.capacity
            return sim_object(obj)

    # -- catalog CSV -------------------------------------------------------------------
    # Not translated: a database error here reaches the API as it is, which answers a
    # restarting database with 503 (retry) as for any request, not with a backend error.

    async def import_objects(
        self, volumes: list[str], *, replace: bool, plan: ImportPlan, chunk: int = 500
    ) -> None:
        """Write the objects *plan* makes, in one transaction: all of them or none.

        *replace*: the catalog becomes exactly those objects, and the tapes not among
        the fills are emptied back to scratch; otherwise the objects of *volumes* are
        replaced.
        """
        async with self.sessions() as session, session.begin():
            tapes = {t.volume: t for t in await session.scalars(select(SimTape))}
            if replace:
                await session.execute(delete(SimObject))
                existing: ByVolume = {}
            else:
                existing = await _existing(session, volumes, chunk)
            objects, fills = await plan({v: cartridge(t) for v, t in tapes.items()}, existing)
            if not replace:
                for part in chunks(volumes, chunk):
                    await session.execute(delete(SimObject).where(SimObject.volume.in_(part)))
            # Core executemany in large batches: the ORM's per-object bookkeeping would
            # cost more than the database for a catalog of 100,000 copies.
            for batch in chunks(objects, INSERT_BATCH):
                await session.execute(insert(OBJECTS), list(batch))
            _update_tapes(session, tapes, fills, reset_others=replace)
        # The import is what grew the tables: statistics of them before it (a fresh
        # install's are of empty tables) would plan every later read (tssd.db.statistics).
        await analyse(self._engine, ("sim_objects", "sim_tapes"))

    async def export_rows(self) -> list[tuple[str, str, int, int, str | None, datetime]]:
        """(pnfsid, volume, seq, size, storage_class, written_at) of every copy, by
        volume and sequence."""
        columns = (
            SimObject.pnfsid,
            SimObject.volume,
            SimObject.seq,
            SimObject.size,
            SimObject.storage_class,
            SimObject.written_at,
        )
        async with self.sessions() as session:
            result = await session.execute(
                select(*columns).order_by(SimObject.volume, SimObject.seq)
            )
            return [(p, v, seq, size, sc, at) for p, v, seq, size, sc, at in result.all()]

    async def count_objects(self) -> int:
        async with self.sessions() as session:
            return int(await session.scalar(select(func.count()).select_from(SimObject)) or 0)


async def _existing(session: AsyncSession, volumes: list[str], chunk: int) -> ByVolume:
    found: ByVolume = {}
    columns = list(OBJECTS.columns)
    for part in chunks(volumes, chunk):
        result = await session.execute(select(*columns).where(SimObject.volume.in_(part)))
        for record in result.mappings():
            found.setdefault(record["volume"], {})[record["seq"]] = dict(record)
    return found


def _update_tapes(
    session: AsyncSession,
    tapes: dict[str, SimTape],
    fills: dict[str, TapeFill],
    *,
    reset_others: bool,
) -> None:
    for volume, fill in fills.items():
        tape = tapes.get(volume)
        if tape is None:
            tape = SimTape(volume=volume, capacity=fill.capacity)
            session.add(tape)
        tape.used, tape.next_seq = fill.used, fill.next_seq
        tape.storage_class = fill.storage_class or tape.storage_class
        tape.full = fill.used >= fill.capacity
    if reset_others:
        for volume, tape in tapes.items():
            if volume not in fills:
                tape.used, tape.next_seq, tape.storage_class, tape.full = 0, 1, None, False


_TAPES = cast(Table, SimTape.__table__)
_TAPE = select(*_TAPES.c).where(_TAPES.c.volume == bindparam("b_volume"))


def _tape(conn: Connection, volume: str) -> SimCartridge | None:
    row = conn.execute(_TAPE, {"b_volume": volume}).first()
    return None if row is None else cartridge(row)


def cartridge(tape: Any) -> SimCartridge:
    """The record of a ``sim_tapes`` row (an ORM object or a core row)."""
    return SimCartridge(
        tape.volume, tape.storage_class, tape.capacity, tape.used, tape.next_seq, tape.full
    )

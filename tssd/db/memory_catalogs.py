"""The backends' catalogs in memory: the :class:`~tssd.backends.catalog.CatalogGateway`
to hand the backend factory when tssd runs without a database (``MemoryCatalogs()``).

The tables answer as :mod:`tssd.db.sim_catalog` and :mod:`tssd.db.scsi_catalog` do, query
for query: the same orders (an unordered SQL read answers in insertion order, as a
table scan does), the same uniqueness of an object's bfid and of its (volume, seq), and
the same errors. A constraint is broken with the database's own error class, so that it
leaves a catalog query as :class:`~tssd.backends.catalog.CatalogUnavailable` through the
very decorator the SQL tables use, and leaves the catalog CSV's import as it is.
tests/integration/test_catalog_contract.py runs the same suite on both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from tssd.backends.catalog import (
    ByVolume,
    ClaimGuard,
    ImportPlan,
    ScsiCartridge,
    ScsiTables,
    SimCartridge,
    SimTables,
    StoredObject,
    TapeFill,
)
from tssd.db.models import utcnow
from tssd.db.tape_catalog import chunks, translated

#: The columns of an object row that a caller may set, and their defaults (None: required).
_SIM_COLUMNS: dict[str, Any] = {
    "bfid": None, "pnfsid": None, "volume": None, "seq": None, "offset": 0, "size": None,
    "adler32": None, "storage_class": None, "written_at": None, "has_data": False,
}  # fmt: skip
_SCSI_COLUMNS: dict[str, Any] = {
    "bfid": None, "pnfsid": None, "volume": None, "seq": None, "block": None, "offset": 0,
    "size": None, "adler32": None, "storage_class": None, "written_at": None,
}  # fmt: skip
#: Columns that may hold NULL; every other one is NOT NULL in the schema.
_NULLABLE = {"sim_objects": {"adler32", "storage_class"}, "scsi_objects": {"storage_class"}}


def _violation(table: str, what: str) -> IntegrityError:
    """The error the database raises for a broken constraint of *table*."""
    return IntegrityError(f"INSERT INTO {table}", None, ValueError(f"{what} ({table})"))


def _utc(value: datetime) -> datetime:
    """A time as the database gives it back: UTC, a naive one taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _as_given(obj: StoredObject, values: dict[str, Any]) -> StoredObject:
    """What an append returns: the SQL's is the row as the caller gave it, before the
    database read it back, so its time is in the zone the caller wrote it in."""
    given = values.get("written_at")
    return obj if given is None else dataclasses.replace(obj, written_at=given)


class _Objects:
    """The object rows of one catalog by bfid, in insertion order, as records."""

    table = "objects"
    columns: dict[str, Any] = {}

    def __init__(self) -> None:
        self.rows: dict[str, StoredObject] = {}

    def _appended(self, placed: dict[str, Any], values: dict[str, Any]) -> StoredObject:
        """The row of an append: where the tape puts it, and the caller's *values*."""
        twice = sorted(placed.keys() & values.keys())
        if twice:
            raise TypeError(f"{self.table} columns given twice: {twice}")
        return self._record({**placed, **values})

    def _record(self, values: dict[str, Any]) -> StoredObject:
        unknown = set(values) - set(self.columns)
        if unknown:
            raise TypeError(f"not {self.table} columns: {sorted(unknown)}")
        row = {**self.columns, **values}
        if row["written_at"] is None:
            row["written_at"] = utcnow()
        missing = [c for c, v in row.items() if v is None and c not in _NULLABLE[self.table]]
        if missing:
            raise _violation(self.table, f"NOT NULL constraint failed: {', '.join(missing)}")
        row["written_at"] = _utc(row["written_at"])
        return StoredObject(**row)

    def _check_unique(self, objects: Iterable[StoredObject], rows: dict[str, StoredObject]) -> None:
        """Refuse *objects* that would share a bfid or a (volume, seq) with *rows* or
        one another, before anything changes."""
        bfids = set(rows)
        places = {(o.volume, o.seq) for o in rows.values()}
        for obj in objects:
            if obj.bfid in bfids:
                raise _violation(self.table, f"UNIQUE constraint failed: bfid {obj.bfid}")
            if (obj.volume, obj.seq) in places:
                raise _violation(self.table, f"UNIQUE constraint failed: volume, seq {obj.seq}")
            bfids.add(obj.bfid)
            places.add((obj.volume, obj.seq))

    def _insert(self, obj: StoredObject) -> None:
        self._check_unique([obj], self.rows)
        self.rows[obj.bfid] = obj

    @translated
    async def get(self, bfid: str) -> StoredObject | None:
        return self.rows.get(bfid)

    @translated
    async def with_bfids(self, bfids: Sequence[str]) -> list[StoredObject]:
        return self._chunked(bfids, lambda obj: obj.bfid)

    @translated
    async def of_pnfsids(self, pnfsids: Sequence[str]) -> list[StoredObject]:
        return self._chunked(pnfsids, lambda obj: obj.pnfsid)

    def _chunked(
        self, keys: Sequence[str], key: Callable[[StoredObject], str]
    ) -> list[StoredObject]:
        # One IN query per chunk, each ordered by written_at and bfid: a key repeated in
        # two chunks finds its objects twice, as the SQL does.
        found: list[StoredObject] = []
        for chunk in chunks(keys):
            wanted = set(chunk)
            hits = [obj for obj in self.rows.values() if key(obj) in wanted]
            found.extend(sorted(hits, key=lambda obj: (obj.written_at, obj.bfid)))
        return found

    @translated
    async def of_pnfsid_sized(self, pnfsid: str, size: int) -> list[StoredObject]:
        return [o for o in self.rows.values() if o.pnfsid == pnfsid and o.size == size]

    @translated
    async def delete(self, bfid: str) -> bool:
        return self.rows.pop(bfid, None) is not None


class MemorySimTables(_Objects):
    """``sim_tapes`` and ``sim_objects`` in memory (:class:`~tssd.backends.catalog.SimTables`)."""

    table = "sim_objects"
    columns = _SIM_COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self.tapes: dict[str, SimCartridge] = {}

    @translated
    async def ensure_tapes(self, volumes: Sequence[str], capacity: int) -> int:
        if self.tapes:
            return len(self.tapes)
        if len(set(volumes)) < len(volumes):
            raise _violation("sim_tapes", "UNIQUE constraint failed: volume")
        for volume in volumes:
            self.tapes[volume] = SimCartridge(volume, None, capacity, 0, 1, False)
        return len(volumes)

    @translated
    async def tape(self, volume: str) -> SimCartridge | None:
        return self.tapes.get(volume)

    @translated
    async def layout(self, volume: str) -> list[tuple[int, int, int]]:
        return sorted((o.seq, o.offset, o.size) for o in self.rows.values() if o.volume == volume)

    @translated
    async def placements(self) -> list[tuple[str, str, int, int, datetime]]:
        return [(o.pnfsid, o.volume, o.seq, o.size, o.written_at) for o in self.rows.values()]

    async def known_bfids(self, bfids: list[str]) -> set[str]:
        return {row.bfid for row in await self.with_bfids(bfids)}

    @translated
    async def max_capacity(self) -> int:
        return max((t.capacity for t in self.tapes.values()), default=0)

    @translated
    async def assign_tape(
        self, storage_class: str, size: int, may_claim: ClaimGuard | None = None
    ) -> str | None:
        filling = [
            t
            for t in self.tapes.values()
            if t.storage_class == storage_class and not t.full and t.capacity - t.used >= size
        ]
        if filling:
            return min(filling, key=lambda t: (-t.used, t.volume)).volume
        if may_claim is not None:
            counts: dict[str | None, int] = {}
            for t in self.tapes.values():
                counts[t.storage_class] = counts.get(t.storage_class, 0) + 1
            may_claim(counts)
        scratch = [
            t
            for t in self.tapes.values()
            if t.storage_class is None and t.used == 0 and t.capacity >= size
        ]
        if not scratch:
            return None
        chosen = min(scratch, key=lambda t: t.volume)
        self.tapes[chosen.volume] = dataclasses.replace(chosen, storage_class=storage_class)
        return chosen.volume

    @translated
    async def append(
        self, volume: str, check: Callable[[SimCartridge], None], **values: Any
    ) -> StoredObject | None:
        tape = self.tapes.get(volume)
        if tape is None:
            return None
        check(tape)
        obj = self._appended({"volume": volume, "seq": tape.next_seq, "offset": tape.used}, values)
        used = tape.used + values["size"]
        advanced = dataclasses.replace(
            tape,
            storage_class=values["storage_class"],
            next_seq=tape.next_seq + 1,
            used=used,
            full=used >= tape.capacity,
        )
        self._insert(obj)
        self.tapes[volume] = advanced
        return _as_given(obj, values)

    # -- catalog CSV -------------------------------------------------------------------

    async def import_objects(
        self, volumes: list[str], *, replace: bool, plan: ImportPlan, chunk: int = 500
    ) -> None:
        """All of the plan's objects or none, as the SQL's one transaction. The plan may
        wait (it runs in a thread): what it decides is applied at once when it returns."""
        imported = set(volumes)
        existing: ByVolume = {}
        if not replace:
            for obj in self.rows.values():
                if obj.volume in imported:
                    existing.setdefault(obj.volume, {})[obj.seq] = _sim_columns(obj)
        objects, fills = await plan(dict(self.tapes), existing)
        kept = {} if replace else {b: o for b, o in self.rows.items() if o.volume not in imported}
        new = [self._record(values) for values in objects]
        self._check_unique(new, kept)
        kept.update((obj.bfid, obj) for obj in new)
        self.rows = kept
        self._update_tapes(fills, reset_others=replace)

    def _update_tapes(self, fills: dict[str, TapeFill], *, reset_others: bool) -> None:
        for volume, fill in fills.items():
            tape = self.tapes.get(volume) or SimCartridge(volume, None, fill.capacity, 0, 1, False)
            self.tapes[volume] = dataclasses.replace(
                tape,
                used=fill.used,
                next_seq=fill.next_seq,
                storage_class=fill.storage_class or tape.storage_class,
                full=fill.used >= fill.capacity,
            )
        if reset_others:
            for volume, tape in self.tapes.items():
                if volume not in fills:
                    self.tapes[volume] = SimCartridge(volume, None, tape.capacity, 0, 1, False)

    async def export_rows(self) -> list[tuple[str, str, int, int, str | None, datetime]]:
        ordered = sorted(self.rows.values(), key=lambda o: (o.volume, o.seq))
        return [(o.pnfsid, o.volume, o.seq, o.size, o.storage_class, o.written_at) for o in ordered]

    async def count_objects(self) -> int:
        return len(self.rows)


def _sim_columns(obj: StoredObject) -> dict[str, Any]:
    """A ``sim_objects`` row as the import's plan is given it: every column."""
    return {column: getattr(obj, column) for column in _SIM_COLUMNS}


class MemoryScsiTables(_Objects):
    """``scsi_tapes`` and ``scsi_objects`` in memory
    (:class:`~tssd.backends.catalog.ScsiTables`)."""

    table = "scsi_objects"
    columns = _SCSI_COLUMNS

    def __init__(self) -> None:
        super().__init__()
        self.tapes: dict[str, ScsiCartridge] = {}

    @translated
    async def add_tapes(self, volumes: Iterable[str], capacity: int, block_size: int) -> int:
        new = sorted(set(volumes) - set(self.tapes))
        for volume in new:
            self.tapes[volume] = ScsiCartridge(
                volume, None, capacity, 0, block_size, 0, 1, False, False, "ok", None
            )
        return len(new)

    @translated
    async def tape(self, volume: str) -> ScsiCartridge | None:
        return self.tapes.get(volume)

    @translated
    async def max_capacity(self) -> int:
        return max((t.capacity for t in self.tapes.values()), default=0)

    @translated
    async def assign_tape(
        self, storage_class: str, pick: Callable[[Sequence[ScsiCartridge]], ScsiCartridge | None]
    ) -> str | None:
        chosen = pick(list(self.tapes.values()))
        if chosen is None:
            return None
        tape = self.tapes[chosen.volume]
        self.tapes[chosen.volume] = dataclasses.replace(tape, storage_class=storage_class)
        return chosen.volume

    @translated
    async def mark_labelled(self, volume: str, next_block: int, block_size: int) -> bool:
        tape = self.tapes.get(volume)
        if tape is None:
            return False
        self.tapes[volume] = dataclasses.replace(
            tape, labelled=True, next_block=next_block, block_size=block_size
        )
        return True

    @translated
    async def append(
        self, volume: str, *, block: int, blocks: int, **values: Any
    ) -> StoredObject | None:
        tape = self.tapes.get(volume)
        if tape is None:
            return None
        placed = {"volume": volume, "seq": tape.next_seq, "block": block, "offset": tape.used}
        obj = self._appended(placed, values)
        advanced = dataclasses.replace(
            tape,
            storage_class=values["storage_class"],
            next_seq=tape.next_seq + 1,
            next_block=block + blocks,
            used=tape.used + blocks * tape.block_size,
        )
        self._insert(obj)
        self.tapes[volume] = advanced
        return _as_given(obj, values)

    @translated
    async def close_tape(self, volume: str, reason: str, *, disable: bool = False) -> None:
        tape = self.tapes.get(volume)
        if tape is not None:
            state = "disabled" if disable else tape.state
            self.tapes[volume] = dataclasses.replace(tape, full=True, reason=reason, state=state)


class MemoryCatalogs:
    """The backends' catalogs in memory; each call gives the same tables, so what a
    backend wrote is there when it (or another one built over this gateway) reads."""

    def __init__(self) -> None:
        self._sim = MemorySimTables()
        self._scsi = MemoryScsiTables()

    def sim(self) -> SimTables:
        return self._sim

    def scsi(self) -> ScsiTables:
        return self._scsi


if TYPE_CHECKING:
    from tssd.backends.catalog import CatalogGateway
    from tssd.db.catalogs import SqlCatalogs
    from tssd.db.scsi_catalog import ScsiCatalogTables
    from tssd.db.sim_catalog import SimCatalogTables

    def _conforms(
        memory: MemoryCatalogs,
        sql: SqlCatalogs,
        sims: tuple[MemorySimTables, SimCatalogTables],
        scsis: tuple[MemoryScsiTables, ScsiCatalogTables],
    ) -> None:
        """For mypy: the memory and the SQL catalogs have the interfaces' signatures."""
        gateways: list[CatalogGateway] = [memory, sql]
        sim: list[SimTables] = [*sims]
        scsi: list[ScsiTables] = [*scsis]
        del gateways, sim, scsi

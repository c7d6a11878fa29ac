"""The backends' catalogs (tssd/backends/catalog.py) on SQLite, PostgreSQL and memory.

Each test runs on the SQL tables (tssd/db/sim_catalog.py, scsi_catalog.py) over SQLite
and PostgreSQL (skipped without a server, a failure under ``CI=true``) and on
:class:`~tssd.db.memory_catalogs.MemoryCatalogs`, so that a backend built over the memory
catalogs behaves as over a database: the same orders, duplicates and errors. The object
queries run on both catalogs; the simulated library's import and export run its catalog
CSV (tssd/backends/sim/catalog_csv.py) on each.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
from store_contract import STORES, open_store

from tssd.backends.catalog import (
    ByVolume,
    CatalogGateway,
    CatalogUnavailable,
    ObjectTables,
    ScsiCartridge,
    ScsiTables,
    SimCartridge,
    SimTables,
    StoredObject,
    TapeFill,
)
from tssd.backends.sim.catalog_csv import CatalogImportError, export_csv, import_csv
from tssd.db.catalogs import SqlCatalogs
from tssd.db.engine import DatabaseError
from tssd.db.memory import MemoryStore
from tssd.db.memory_catalogs import MemoryCatalogs
from tssd.db.store import RequestStore

SC = "atlas:tape"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(params=STORES)
async def catalogs(request: pytest.FixtureRequest) -> AsyncIterator[CatalogGateway]:
    async with open_store(request) as store:
        if isinstance(store, MemoryStore):
            yield MemoryCatalogs()
            return
        assert isinstance(store, RequestStore)
        yield SqlCatalogs(store.sessions)


async def ready(catalogs: CatalogGateway, kind: str) -> ObjectTables:
    """The tables of catalog *kind* with two empty, large tapes VOL001 and VOL002."""
    if kind == "sim":
        await catalogs.sim().ensure_tapes(["VOL001", "VOL002"], 10**9)
        return catalogs.sim()
    await catalogs.scsi().add_tapes(["VOL001", "VOL002"], 10**9, 512)
    return catalogs.scsi()


async def append(
    tables: ObjectTables, bfid: str, pnfsid: str, size: int, *, volume: str = "VOL001",
    at: datetime = T0, storage_class: str = SC, block: int = 7, blocks: int = 1,
    check: Callable[[SimCartridge], None] = lambda tape: None,
) -> StoredObject | None:  # fmt: skip
    """Append an object as the backend of *tables* does (the SCSI one, at *block*)."""
    values: dict[str, Any] = {
        "bfid": bfid, "pnfsid": pnfsid, "size": size, "adler32": "0000000a",
        "storage_class": storage_class, "written_at": at,
    }  # fmt: skip
    if hasattr(tables, "add_tapes"):
        scsi = cast(ScsiTables, tables)
        return await scsi.append(volume, block=block, blocks=blocks, **values)
    sim = cast(SimTables, tables)
    return await sim.append(volume, check, has_data=True, **values)


async def put(tables: ObjectTables, bfid: str, pnfsid: str, size: int, **kw: Any) -> StoredObject:
    written = await append(tables, bfid, pnfsid, size, **kw)
    assert written is not None
    return written


@pytest.fixture(params=["sim", "scsi"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_gateway_gives_tables_with_every_member(catalogs: CatalogGateway) -> None:
    # mypy checks the signatures (tssd/db/memory_catalogs.py, _conforms); this, that
    # none is missing.
    for tables, protocol in ((catalogs.sim(), SimTables), (catalogs.scsi(), ScsiTables)):
        wanted = {name for name in dir(protocol) if not name.startswith("_")}
        assert all(callable(getattr(tables, name, None)) for name in wanted)


async def test_what_one_call_writes_the_next_reads(catalogs: CatalogGateway) -> None:
    assert await catalogs.sim().ensure_tapes(["VOL001"], 1000) == 1
    assert await catalogs.scsi().add_tapes(["TSS001"], 1000, 512) == 1
    assert None not in (await catalogs.sim().tape("VOL001"), await catalogs.scsi().tape("TSS001"))
    assert await catalogs.sim().tape("TSS001") is None  # each backend has its own


# -- the object queries both catalogs answer --------------------------------------------


async def test_an_object_reads_back_as_it_was_written(catalogs: CatalogGateway, kind: str) -> None:
    tables = await ready(catalogs, kind)
    written = await put(tables, "B1", "00AA", 10)
    assert type(written) is StoredObject
    assert await tables.get("B1") == written
    assert (written.volume, written.seq, written.offset, written.size) == ("VOL001", 1, 0, 10)
    assert (written.adler32, written.storage_class, written.written_at) == ("0000000a", SC, T0)
    assert written.has_data and written.block == (0 if kind == "sim" else 7)
    assert await tables.get("nope") is None


async def test_times_read_back_in_utc(catalogs: CatalogGateway, kind: str) -> None:
    tables = await ready(catalogs, kind)
    east = datetime(2024, 1, 1, 2, 0, 0, 250, tzinfo=timezone(timedelta(hours=2)))
    written = await put(tables, "B1", "00AA", 10, at=east)
    # The append answers with the row as written; a read, with the database's UTC.
    assert written.written_at == east and written.written_at.utcoffset() == timedelta(hours=2)
    for stored in [await tables.get("B1"), *await tables.of_pnfsids(["00AA"])]:
        assert stored is not None and stored.written_at == east
        assert stored.written_at.utcoffset() == timedelta(0)


async def test_objects_of_keys_come_oldest_first_then_by_bfid(
    catalogs: CatalogGateway, kind: str
) -> None:
    tables = await ready(catalogs, kind)
    await put(tables, "B3", "00AA", 10, at=T0)
    await put(tables, "B2", "00BB", 10, at=T0 + timedelta(seconds=1))
    await put(tables, "B1", "00AA", 20, at=T0 + timedelta(seconds=1))
    await put(tables, "B0", "00CC", 10, at=T0 - timedelta(seconds=1))
    found = await tables.of_pnfsids(["00BB", "00AA", "00AA", "00DD"])
    assert [o.bfid for o in found] == ["B3", "B1", "B2"]
    found = await tables.with_bfids(["B2", "B0", "B1", "B1", "B9"])
    assert [o.bfid for o in found] == ["B0", "B1", "B2"]
    assert await tables.with_bfids([]) == [] and await tables.of_pnfsids([]) == []


async def test_keys_are_read_in_chunks_of_500(catalogs: CatalogGateway, kind: str) -> None:
    """Each chunk is ordered on its own, and a key in two chunks finds its objects twice."""
    tables = await ready(catalogs, kind)
    await put(tables, "B1", "00AA", 10, at=T0)
    await put(tables, "B2", "00BB", 10, at=T0 + timedelta(seconds=1))
    filler = [f"F{i:04d}" for i in range(498)]
    found = await tables.of_pnfsids(["00BB", "00AA", *filler, "00AA"])
    assert [o.bfid for o in found] == ["B1", "B2", "B1"]
    found = await tables.with_bfids(["B2", *filler, "B9", "B1"])
    assert [o.bfid for o in found] == ["B2", "B1"]


async def test_copies_of_a_pnfsid_with_a_size(catalogs: CatalogGateway, kind: str) -> None:
    tables = await ready(catalogs, kind)
    await put(tables, "B1", "00AA", 10)
    await put(tables, "B2", "00AA", 20)
    await put(tables, "B3", "00AA", 10, volume="VOL002")
    await put(tables, "B4", "00BB", 10)
    found = await tables.of_pnfsid_sized("00AA", 10)
    assert sorted(o.bfid for o in found) == ["B1", "B3"]
    assert await tables.of_pnfsid_sized("00AA", 30) == []


async def test_delete_says_whether_there_was_an_object(catalogs: CatalogGateway, kind: str) -> None:
    tables = await ready(catalogs, kind)
    await put(tables, "B1", "00AA", 10)
    assert await tables.delete("B1") is True
    assert await tables.delete("B1") is False
    assert await tables.get("B1") is None and await tables.of_pnfsids(["00AA"]) == []


async def test_a_second_object_of_one_bfid_is_refused_and_changes_nothing(
    catalogs: CatalogGateway, kind: str
) -> None:
    tables = await ready(catalogs, kind)
    first = await put(tables, "B1", "00AA", 10)
    tape = await tape_of(catalogs, kind, "VOL002")
    with pytest.raises(CatalogUnavailable) as raised:
        await put(tables, "B1", "00BB", 20, volume="VOL002")
    assert raised.value.__cause__ is not None
    assert await tables.get("B1") == first
    assert await tape_of(catalogs, kind, "VOL002") == tape
    assert (await put(tables, "B2", "00BB", 20, volume="VOL002")).seq == 1


async def test_an_append_to_an_unknown_volume_is_none(catalogs: CatalogGateway, kind: str) -> None:
    tables = await ready(catalogs, kind)
    assert await append(tables, "B1", "00AA", 10, volume="NOPE") is None
    assert await tables.get("B1") is None


async def tape_of(catalogs: CatalogGateway, kind: str, volume: str) -> object:
    if kind == "sim":
        return await catalogs.sim().tape(volume)
    return await catalogs.scsi().tape(volume)


# -- the SCSI library's tapes --------------------------------------------------------------


def scsi_tape(volume: str, **changes: object) -> ScsiCartridge:
    fields: dict[str, object] = {
        "volume": volume, "storage_class": None, "capacity": 1000, "used": 0,
        "block_size": 512, "next_block": 0, "next_seq": 1, "labelled": False, "full": False,
        "state": "ok", "reason": None,
    }  # fmt: skip
    return ScsiCartridge(**{**fields, **changes})  # type: ignore[arg-type]


async def test_scsi_tapes_are_added_once(catalogs: CatalogGateway) -> None:
    tables = catalogs.scsi()
    assert await tables.max_capacity() == 0
    assert await tables.add_tapes(["TSS002", "TSS001", "TSS002"], 1000, 512) == 2
    assert await tables.add_tapes(iter(["TSS003", "TSS001"]), 5000, 1024) == 1
    assert await tables.tape("TSS001") == scsi_tape("TSS001")
    assert await tables.tape("TSS003") == scsi_tape("TSS003", capacity=5000, block_size=1024)
    assert await tables.tape("TSS009") is None
    assert await tables.max_capacity() == 5000


async def test_a_scsi_tape_is_assigned_to_what_pick_chooses(catalogs: CatalogGateway) -> None:
    tables = catalogs.scsi()
    await tables.add_tapes(["TSS001", "TSS002"], 1000, 512)
    seen: list[list[ScsiCartridge]] = []

    def pick(tapes: object) -> ScsiCartridge | None:
        assert isinstance(tapes, list | tuple)
        seen.append(sorted(tapes, key=lambda t: t.volume))
        return None if len(seen) == 1 else seen[-1][1]

    assert await tables.assign_tape(SC, pick) is None
    assert await tables.tape("TSS002") == scsi_tape("TSS002")
    assert await tables.assign_tape(SC, pick) == "TSS002"
    assert seen == [[scsi_tape("TSS001"), scsi_tape("TSS002")]] * 2
    assert await tables.tape("TSS002") == scsi_tape("TSS002", storage_class=SC)


async def test_a_scsi_append_moves_the_end_of_data(catalogs: CatalogGateway) -> None:
    tables = catalogs.scsi()
    await tables.add_tapes(["TSS001"], 10_000, 512)
    assert await tables.mark_labelled("TSS001", 3, 1024) is True
    assert await tables.mark_labelled("TSS009", 3, 1024) is False
    assert await tables.tape("TSS001") == scsi_tape(
        "TSS001", capacity=10_000, labelled=True, next_block=3, block_size=1024
    )
    first = await put(tables, "B1", "00AA", 1500, volume="TSS001", block=3, blocks=2)
    second = await put(tables, "B2", "00BB", 10, volume="TSS001", block=5, blocks=1)
    assert [(o.seq, o.block, o.offset) for o in (first, second)] == [(1, 3, 0), (2, 5, 2048)]
    assert await tables.tape("TSS001") == scsi_tape(
        "TSS001", storage_class=SC, capacity=10_000, used=3072, block_size=1024,
        next_block=6, next_seq=3, labelled=True,
    )  # fmt: skip


async def test_a_closed_scsi_tape_is_full_and_maybe_disabled(catalogs: CatalogGateway) -> None:
    tables = catalogs.scsi()
    await tables.add_tapes(["TSS001", "TSS002"], 1000, 512)
    await tables.close_tape("TSS001", "end of medium")
    await tables.close_tape("TSS002", "write error", disable=True)
    await tables.close_tape("TSS009", "unknown: nothing happens")
    assert await tables.tape("TSS001") == scsi_tape("TSS001", full=True, reason="end of medium")
    assert await tables.tape("TSS002") == scsi_tape(
        "TSS002", full=True, reason="write error", state="disabled"
    )


# -- the simulated library's tapes ----------------------------------------------------------


def sim_tape(volume: str, **changes: Any) -> SimCartridge:
    fields: dict[str, Any] = {
        "volume": volume, "storage_class": None, "capacity": 1000, "used": 0, "next_seq": 1,
        "full": False,
    }  # fmt: skip
    return SimCartridge(**{**fields, **changes})


async def test_sim_tapes_are_created_only_in_an_empty_library(catalogs: CatalogGateway) -> None:
    tables = catalogs.sim()
    assert await tables.max_capacity() == 0
    assert await tables.ensure_tapes(["VOL002", "VOL001"], 1000) == 2
    assert await tables.ensure_tapes(["VOL003"], 5000) == 2
    assert await tables.tape("VOL001") == sim_tape("VOL001")
    assert await tables.tape("VOL003") is None
    assert await tables.max_capacity() == 1000


async def test_sim_tapes_of_one_name_are_refused(catalogs: CatalogGateway) -> None:
    tables = catalogs.sim()
    with pytest.raises(CatalogUnavailable):
        await tables.ensure_tapes(["VOL001", "VOL001"], 1000)
    assert await tables.tape("VOL001") is None


class Refused(Exception):
    pass


async def test_a_sim_tape_is_the_fullest_filling_one_else_the_first_scratch(
    catalogs: CatalogGateway,
) -> None:
    tables = catalogs.sim()
    await tables.ensure_tapes(["VOLC", "VOLA", "VOLB"], 1000)
    claims: list[dict[str | None, int]] = []

    def refuse(counts: dict[str | None, int]) -> None:
        raise Refused(str(counts))

    assert await tables.assign_tape(SC, 100, claims.append) == "VOLA"
    await put(tables, "B1", "00AA", 300, volume="VOLA")
    assert await tables.assign_tape(SC, 800, claims.append) == "VOLB"
    assert claims == [{None: 3}, {SC: 1, None: 2}]
    await put(tables, "B2", "00BB", 600, volume="VOLB")
    assert await tables.assign_tape(SC, 100, refuse) == "VOLB"  # filling: no claim
    assert await tables.assign_tape(SC, 500) == "VOLA"
    with pytest.raises(Refused, match="None: 1"):
        await tables.assign_tape("cms:raw", 100, refuse)
    assert await tables.tape("VOLC") == sim_tape("VOLC")
    assert await tables.assign_tape("cms:raw", 1001) is None
    assert await tables.assign_tape(SC, 1001) is None
    await put(tables, "B3", "00CC", 400, volume="VOLB")
    assert await tables.tape("VOLB") == sim_tape(
        "VOLB", storage_class=SC, used=1000, next_seq=3, full=True
    )
    assert await tables.assign_tape(SC, 0) == "VOLA"


async def test_a_sim_append_is_checked_on_the_tape_it_advances(
    catalogs: CatalogGateway,
) -> None:
    tables = catalogs.sim()
    await tables.ensure_tapes(["VOL001"], 1000)
    seen: list[SimCartridge] = []

    def refuse(tape: SimCartridge) -> None:
        seen.append(tape)
        raise Refused(tape.volume)

    with pytest.raises(Refused):
        await put(tables, "B1", "00AA", 10, check=refuse)
    assert seen == [sim_tape("VOL001")]
    assert await tables.get("B1") is None and await tables.tape("VOL001") == seen[0]
    first = await put(tables, "B1", "00AA", 10)  # has_data=True
    second = await tables.append(
        "VOL001", seen.append, bfid="B2", pnfsid="00BB", size=20, adler32=None,
        storage_class=SC, written_at=T0,
    )  # fmt: skip
    assert second is not None and await tables.get("B2") == StoredObject(
        "B2", "00BB", "VOL001", 2, 10, 20, None, SC, T0, has_data=False
    )
    assert (first.seq, first.offset, first.has_data) == (1, 0, True)
    assert seen[-1] == sim_tape("VOL001", storage_class=SC, used=10, next_seq=2)


async def test_sim_reads_of_the_whole_catalog(catalogs: CatalogGateway) -> None:
    tables = cast(SimTables, await ready(catalogs, "sim"))
    assert await tables.count_objects() == 0 and await tables.export_rows() == []
    await put(tables, "B1", "00AA", 10, volume="VOL002", at=T0)
    await put(tables, "B2", "00BB", 20, at=T0 + timedelta(seconds=1))
    await put(tables, "B3", "00CC", 30, volume="VOL002", storage_class="cms:raw")
    assert await tables.layout("VOL002") == [(1, 0, 10), (2, 10, 30)]
    assert await tables.layout("VOL009") == []
    assert sorted(await tables.placements()) == [
        ("00AA", "VOL002", 1, 10, T0),
        ("00BB", "VOL001", 1, 20, T0 + timedelta(seconds=1)),
        ("00CC", "VOL002", 2, 30, T0),
    ]
    assert await tables.known_bfids(["B3", "B9", "B1"]) == {"B1", "B3"}
    assert await tables.export_rows() == [
        ("00BB", "VOL001", 1, 20, SC, T0 + timedelta(seconds=1)),
        ("00AA", "VOL002", 1, 10, SC, T0),
        ("00CC", "VOL002", 2, 30, "cms:raw", T0),
    ]
    assert await tables.count_objects() == 3


# -- the simulated library's import ---------------------------------------------------------


def imported(
    bfid: str, pnfsid: str, volume: str, seq: int, offset: int, size: int
) -> dict[str, Any]:
    return {
        "bfid": bfid, "pnfsid": pnfsid, "volume": volume, "seq": seq, "offset": offset,
        "size": size, "adler32": None, "storage_class": SC, "written_at": T0, "has_data": False,
    }  # fmt: skip


class Plan:
    """An import plan that writes *objects* and *fills* and keeps what it was given."""

    def __init__(self, objects: list[dict[str, Any]], fills: dict[str, TapeFill]) -> None:
        self.objects, self.fills = objects, fills
        self.given: list[tuple[dict[str, SimCartridge], ByVolume]] = []

    async def __call__(
        self, tapes: dict[str, SimCartridge], existing: ByVolume
    ) -> tuple[list[dict[str, Any]], dict[str, TapeFill]]:
        self.given.append((tapes, existing))
        return self.objects, self.fills


async def test_an_import_merges_into_the_volumes_it_names(catalogs: CatalogGateway) -> None:
    tables = cast(SimTables, await ready(catalogs, "sim"))
    kept = await put(tables, "B1", "00AA", 10)
    await put(tables, "B2", "00BB", 20, volume="VOL002")
    plan = Plan(
        [imported("I1", "00CC", "VOL002", 2, 20, 5), imported("I2", "00DD", "VOL003", 1, 0, 7)],
        {"VOL002": TapeFill(10**9, 25, 3, None), "VOL003": TapeFill(500, 500, 2, SC)},
    )
    await tables.import_objects(["VOL002", "VOL003"], replace=False, plan=plan)
    [(tapes, existing)] = plan.given
    assert set(tapes) == {"VOL001", "VOL002"} and tapes["VOL002"].next_seq == 2
    assert existing == {"VOL002": {1: {
        "bfid": "B2", "pnfsid": "00BB", "volume": "VOL002", "seq": 1, "offset": 0, "size": 20,
        "adler32": "0000000a", "storage_class": SC, "written_at": T0, "has_data": True,
    }}}  # fmt: skip
    # The plan's objects replace those of the volumes it names; other volumes keep theirs.
    assert await tables.with_bfids(["B1", "B2", "I1", "I2"]) == [
        kept,
        StoredObject(**imported("I1", "00CC", "VOL002", 2, 20, 5)),
        StoredObject(**imported("I2", "00DD", "VOL003", 1, 0, 7)),
    ]
    assert await tables.tape("VOL002") == sim_tape(
        "VOL002", storage_class=SC, capacity=10**9, used=25, next_seq=3
    )
    assert await tables.tape("VOL003") == sim_tape(
        "VOL003", storage_class=SC, capacity=500, used=500, next_seq=2, full=True
    )
    assert await tables.count_objects() == 3


async def test_an_import_that_replaces_empties_the_other_tapes(catalogs: CatalogGateway) -> None:
    tables = cast(SimTables, await ready(catalogs, "sim"))
    await put(tables, "B1", "00AA", 10)
    plan = Plan([imported("I1", "00CC", "VOL002", 1, 0, 5)], {"VOL002": TapeFill(5, 5, 2, SC)})
    await tables.import_objects(["VOL002"], replace=True, plan=plan)
    assert plan.given[0][1] == {}
    assert [o.bfid for o in await tables.of_pnfsids(["00AA", "00CC"])] == ["I1"]
    assert await tables.tape("VOL001") == sim_tape("VOL001", capacity=10**9)
    # The fill's capacity decides fullness; the tape keeps its own.
    assert await tables.tape("VOL002") == sim_tape(
        "VOL002", storage_class=SC, capacity=10**9, used=5, next_seq=2, full=True
    )


async def test_an_import_that_fails_writes_nothing(catalogs: CatalogGateway) -> None:
    tables = cast(SimTables, await ready(catalogs, "sim"))
    await put(tables, "B1", "00AA", 10)
    before = (await tables.export_rows(), await tables.tape("VOL002"))
    clash = imported("B1", "00CC", "VOL002", 1, 0, 5)  # B1 is on VOL001, not imported
    for objects in ([clash], [imported("I1", "00CC", "VOL002", 1, 0, 5)] * 2):
        plan = Plan(objects, {"VOL002": TapeFill(10**9, 5, 2, SC)})
        with pytest.raises(DatabaseError):
            await tables.import_objects(["VOL002"], replace=False, plan=plan)
        assert (await tables.export_rows(), await tables.tape("VOL002")) == before
    overfull = io.StringIO(HEADER + "00AA,VOL009,1,5,,2024-01-01\n")
    with pytest.raises(CatalogImportError, match="5 bytes exceed its capacity of 1"):
        await import_csv(tables, overfull, replace=True, capacity=1)
    assert (await tables.export_rows(), await tables.tape("VOL002")) == before


HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
CANONICAL = HEADER + (
    "00A1,T00001,1,1000,atlas:tape,2019-03-01T12:00:00+00:00\n"
    "00A2,T00001,2,2500,atlas:tape,2019-03-01T12:05:00.250000+00:00\n"
    "00A1,T00001,3,1000,atlas:tape,2019-04-01T00:00:00+00:00\n"
    "00B1,T00002,1,0,,2019-03-02T00:00:00+00:00\n"
    "00A1,T00003,4,1000,cms:raw,2020-01-01T00:00:00+00:00\n"
)


async def export(tables: SimTables) -> str:
    out = io.StringIO()
    await export_csv(tables, out)
    return out.getvalue()


async def test_the_catalog_csv_round_trips_merges_and_replaces(catalogs: CatalogGateway) -> None:
    tables = catalogs.sim()
    summary = await import_csv(tables, io.StringIO(CANONICAL), replace=True, capacity=10_000)
    assert summary == {"rows": 5, "volumes": 3, "replace": True, "objects": 5}
    assert await export(tables) == CANONICAL
    await import_csv(tables, io.StringIO(await export(tables)), replace=False)
    assert await export(tables) == CANONICAL
    assert await tables.tape("T00001") == SimCartridge("T00001", SC, 10_000, 4500, 4, False)
    extra = HEADER + "00F1,T00009,1,7,atlas:tape,2021-01-01T00:00:00Z\n"
    await import_csv(tables, io.StringIO(extra), replace=False)
    assert await tables.count_objects() == 6
    with pytest.raises(CatalogImportError, match="volume T00001 seq 2 holds pnfsid 00A2"):
        await import_csv(tables, io.StringIO(HEADER + "00F2,T00001,2,7,,2021-01-01\n"),
                         replace=False)  # fmt: skip
    await import_csv(tables, io.StringIO(extra), replace=True)
    assert await export(tables) == extra.replace("Z", "+00:00")
    assert await tables.tape("T00001") == SimCartridge("T00001", None, 10_000, 0, 1, False)
    assert await tables.tape("T00009") == SimCartridge("T00009", SC, 10_000, 7, 2, False)

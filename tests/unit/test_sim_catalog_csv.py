"""Catalog CSV import and export of the simulated library (docs/api.md, "catalog CSV")."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.sim.catalog_csv import (
    CatalogImportError,
    bfid_for,
    export_csv,
    import_csv,
)
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base, SimObject, SimTape
from tssd.db.sim_catalog import SimCatalogTables

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
CAPACITY = 10_000


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def objects(sessions: async_sessionmaker[Any]) -> list[SimObject]:
    async with sessions() as session:
        rows = await session.scalars(select(SimObject).order_by(SimObject.volume, SimObject.seq))
        return list(rows)


async def tapes(sessions: async_sessionmaker[Any]) -> dict[str, SimTape]:
    async with sessions() as session:
        return {t.volume: t for t in await session.scalars(select(SimTape))}


async def load(sessions: async_sessionmaker[Any], text: str, *, replace: bool = False) -> Any:
    return await import_csv(
        SimCatalogTables(sessions), io.StringIO(text), replace=replace, capacity=CAPACITY
    )


async def export(sessions: async_sessionmaker[Any]) -> str:
    out = io.StringIO()
    await export_csv(SimCatalogTables(sessions), out)
    return out.getvalue()


CANONICAL = HEADER + (
    "00A1,T00001,1,1000,atlas:tape,2019-03-01T12:00:00+00:00\n"
    "00A2,T00001,2,2500,atlas:tape,2019-03-01T12:05:00.250000+00:00\n"
    "00A1,T00001,3,1000,atlas:tape,2019-04-01T00:00:00+00:00\n"
    "00B1,T00002,1,0,,2019-03-02T00:00:00+00:00\n"
    "00A1,T00003,4,1000,cms:raw,2020-01-01T00:00:00+00:00\n"
)


async def test_round_trip_is_identical(sessions: async_sessionmaker[Any]) -> None:
    summary = await load(sessions, CANONICAL, replace=True)
    assert summary == {"rows": 5, "volumes": 3, "replace": True, "objects": 5}
    assert await export(sessions) == CANONICAL
    # Importing the export again changes nothing: object ids derive from the rows.
    before = [(o.bfid, o.offset) for o in await objects(sessions)]
    await load(sessions, await export(sessions))
    assert [(o.bfid, o.offset) for o in await objects(sessions)] == before
    assert await export(sessions) == CANONICAL


async def test_offsets_and_tape_fill(sessions: async_sessionmaker[Any]) -> None:
    # Rows in any order, a gap in the sequence, an extra column and a naive time.
    text = (
        "pnfsid,volume,seq,size,storage_class,written_at,checksum\n"
        "00C3,V1,5,300,atlas:tape,2019-01-03T00:00:00,ffff\n"
        "00C1,V1,1,100,atlas:tape,2019-01-01T00:00:00Z,ffff\n"
        "00C2,V1,2,200,atlas:tape,2019-01-02T00:00:00+02:00,ffff\n"
        "00D1,V2,1,10000,cms:raw,2019-01-01T00:00:00Z,ffff\n"
    )
    await load(sessions, text)
    by_seq = {(o.volume, o.seq): o for o in await objects(sessions)}
    assert [by_seq["V1", s].offset for s in (1, 2, 5)] == [0, 100, 300]
    assert by_seq["V1", 1].bfid == bfid_for("00C1", "V1", 1)
    assert not any(o.has_data for o in by_seq.values())
    assert by_seq["V1", 5].written_at.hour == 0  # naive means UTC
    fill = await tapes(sessions)
    assert (fill["V1"].used, fill["V1"].next_seq, fill["V1"].full) == (600, 6, False)
    assert fill["V1"].storage_class == "atlas:tape" and fill["V1"].capacity == CAPACITY
    assert (fill["V2"].used, fill["V2"].next_seq, fill["V2"].full) == (10000, 2, True)


async def test_bad_rows_are_all_reported_and_nothing_is_imported(
    sessions: async_sessionmaker[Any],
) -> None:
    await load(sessions, CANONICAL)
    before = await export(sessions)
    text = HEADER + (
        "00E1,V1,1,100,atlas:tape,2019-01-01T00:00:00Z\n"
        "xyz!,V1,2,100,atlas:tape,2019-01-01T00:00:00Z\n"
        "00E3,V1,0,100,atlas:tape,2019-01-01T00:00:00Z\n"
        "00E4,V1,3,-5,atlas:tape,2019-01-01T00:00:00Z\n"
        "00E5,V1,4,100,atlas:tape,yesterday\n"
        "00E6,V1,1,100,atlas:tape,2019-01-01T00:00:00Z\n"
        "00E7,,5,100,atlas:tape,2019-01-01T00:00:00Z\n"
        "00E8,V1,6,ten,atlas:tape,2019-01-01T00:00:00Z\n"
    )
    with pytest.raises(CatalogImportError) as raised:
        await load(sessions, text)
    assert [e.split(":")[0] for e in raised.value.errors] == [f"line {n}" for n in range(3, 10)]
    message = str(raised.value)
    for reason in (
        "pnfsid 'xyz!'",
        "seq 0 is less than 1",
        "size -5",
        "not ISO 8601",
        "already on line 2",
        "volume ''",
        "size 'ten' is not an integer",
    ):
        assert reason in message
    assert raised.value.exit_code == 32
    assert await export(sessions) == before
    assert set(await tapes(sessions)) == {"T00001", "T00002", "T00003"}


async def test_missing_column_and_overfull_tape_are_refused(
    sessions: async_sessionmaker[Any],
) -> None:
    with pytest.raises(CatalogImportError, match=r"line 1: header lacks column.*written_at"):
        await load(sessions, "pnfsid,volume,seq,size,storage_class\n00A1,V1,1,5,a\n")
    over = HEADER + "".join(
        f"00F{s},V1,{s},4000,atlas:tape,2019-01-01T00:00:00Z\n" for s in range(1, 4)
    )
    with pytest.raises(CatalogImportError, match="V1: 12000 bytes exceed its capacity"):
        await load(sessions, over)
    assert await objects(sessions) == [] and await tapes(sessions) == {}


async def test_merge_and_replace(sessions: async_sessionmaker[Any]) -> None:
    await load(sessions, CANONICAL)
    # Merge: a new volume is added, existing rows stay, and a new row fills in offsets.
    await load(sessions, HEADER + "00F1,T00009,1,7,atlas:tape,2021-01-01T00:00:00Z\n")
    assert len(await objects(sessions)) == 6
    with pytest.raises(CatalogImportError, match="line 2: volume T00001 seq 2 holds pnfsid 00A2"):
        await load(sessions, HEADER + "00F2,T00001,2,7,atlas:tape,2021-01-01T00:00:00Z\n")
    # Replace: exactly the file; cartridges not in it go back to scratch.
    await load(sessions, HEADER + "00F1,T00009,1,7,atlas:tape,2021-01-01T00:00:00Z\n", replace=True)
    assert [(o.pnfsid, o.volume) for o in await objects(sessions)] == [("00F1", "T00009")]
    fill = await tapes(sessions)
    assert (fill["T00001"].used, fill["T00001"].next_seq, fill["T00001"].storage_class) == (
        0,
        1,
        None,
    )
    assert fill["T00009"].used == 7

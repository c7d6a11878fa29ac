"""The backends' catalog boundary: a backend is its package and one line in ``BUILDERS``;
db/ answers the catalog interfaces with records; a database that fails reaches a backend
as CatalogUnavailable, which it reports as a transient backend error."""

from __future__ import annotations

import importlib
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.catalog import (
    CatalogUnavailable,
    ScsiCartridge,
    ScsiTables,
    SimCartridge,
    StoredObject,
)
from tssd.backends.factory import BUILDERS
from tssd.backends.scsi.catalog import Catalog as ScsiCatalog
from tssd.backends.sim.catalog import RC_COMM_FAILURE
from tssd.backends.sim.catalog import Catalog as SimCatalog
from tssd.backends.sim.catalog_csv import import_csv
from tssd.db.catalogs import SqlCatalogs
from tssd.db.engine import create_engine, session_factory
from tssd.db.sim_catalog import SimCatalogTables
from tssd.errors import TransientBackendError

BACKENDS = Path(__file__).resolve().parents[2] / "tssd" / "backends"
CSV = (
    "pnfsid,volume,seq,size,storage_class,written_at\n"
    "00AA01,VOL001,1,100,exp:raw@osm,2024-01-01T00:00:00\n"
    "00AA02,VOL001,2,200,exp:raw@osm,2024-01-01T00:00:01\n"
)


def test_every_backend_is_its_package_and_one_registration_line() -> None:
    packages = {p.parent.name for p in BACKENDS.glob("*/backend.py")}
    assert set(BUILDERS) == packages
    for name in BUILDERS:
        assert callable(importlib.import_module(f"tssd.backends.{name}.backend").create)


async def test_the_sql_catalog_answers_with_records(sessions: async_sessionmaker[Any]) -> None:
    tables = SqlCatalogs(sessions).sim()
    await import_csv(tables, io.StringIO(CSV), replace=True, capacity=10_000)
    found = await tables.of_pnfsids(["00AA01", "00AA02"])
    assert all(type(obj) is StoredObject for obj in found)
    assert [(o.volume, o.seq, o.offset, o.has_data) for o in found] == [
        ("VOL001", 1, 0, False),
        ("VOL001", 2, 100, False),
    ]
    tape = await tables.tape("VOL001")
    assert tape == SimCartridge("VOL001", "exp:raw@osm", 10_000, 300, 3, False)
    assert await tables.get("nope") is None


async def test_a_scsi_write_is_recorded_as_a_record(sessions: async_sessionmaker[Any]) -> None:
    catalog = ScsiCatalog(SqlCatalogs(sessions).scsi())
    assert await catalog.ensure_tapes(["TSS001"], 1_000_000, 1024) == 1
    assert await catalog.allocate("exp:raw@osm", 10, {"TSS001"}) == "TSS001"
    copy = await catalog.record(
        "TSS001", bfid="b1", pnfsid="00AA01", storage_class="exp:raw@osm", size=10,
        adler32="0000000a", written_at=datetime(2024, 1, 1, tzinfo=UTC), block=1, blocks=2,
    )  # fmt: skip
    assert (copy.volume, copy.position, copy.offset) == ("TSS001", 1, 0)
    obj = await catalog.object("b1")
    assert obj is not None and (obj.block, obj.has_data) == (1, True)
    tape = await catalog.tape("TSS001")
    assert isinstance(tape, ScsiCartridge)
    assert (tape.storage_class, tape.next_block, tape.next_seq, tape.used) == (
        "exp:raw@osm", 3, 2, 2048,
    )  # fmt: skip


async def test_a_database_error_becomes_a_transient_backend_error(tmp_path: Path) -> None:
    # No tables: every query fails in the database.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        tables = SimCatalogTables(session_factory(engine))
        with pytest.raises(CatalogUnavailable, match="no such table") as raw:
            await tables.tape("VOL001")
        assert raw.value.__cause__ is not None
        with pytest.raises(TransientBackendError) as caught:
            await SimCatalog(tables).tape("VOL001")
        assert str(caught.value).startswith("simulated catalog unavailable: ")
        assert caught.value.code == RC_COMM_FAILURE
    finally:
        await engine.dispose()


class FakeScsiTables:
    """Only what allocate uses: the backends need no database to be tested."""

    def __init__(self, tapes: Sequence[ScsiCartridge]) -> None:
        self.tapes = list(tapes)
        self.assigned: list[tuple[str, str]] = []

    async def assign_tape(self, storage_class: str, pick: Any) -> str | None:
        chosen = pick(self.tapes)
        if chosen is not None:
            self.assigned.append((chosen.volume, storage_class))
        return None if chosen is None else chosen.volume


async def test_the_scsi_catalog_chooses_among_records() -> None:
    def tape(volume: str, storage_class: str | None, used: int) -> ScsiCartridge:
        return ScsiCartridge(volume, storage_class, 100, used, 10, 0, 1, True, False, "ok", None)

    fake = FakeScsiTables([tape("A", None, 0), tape("B", "x", 50), tape("C", "x", 95)])
    catalog = ScsiCatalog(cast(ScsiTables, fake))
    assert await catalog.allocate("x", 20, {"A", "B", "C"}) == "B"
    assert fake.assigned == [("B", "x")]

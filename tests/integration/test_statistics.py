"""tssd keeps planner statistics current where it grows a table itself (tssd.db.statistics),
and the schema gives PostgreSQL autovacuum settings fit for a queue table. SQLite and
PostgreSQL; the statistics read are the databases' own (``sqlite_stat1``, ``pg_class``)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.backends.sim.catalog_csv import import_csv
from tssd.db.engine import create_engine, session_factory
from tssd.db.schema import ensure_schema
from tssd.db.sim_catalog import SimCatalogTables
from tssd.db.statistics import Upkeep, analyse
from tssd.db.store import RequestStore
from tssd.submit import SubmitSpec, parse_submit


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(db_url)
    await ensure_schema(engine, auto_init=True)
    try:
        yield engine
    finally:
        await engine.dispose()


async def _analysed_rows(engine: AsyncEngine, table: str) -> float | None:
    """The row count the planner's statistics give *table*; None if never analysed."""
    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            sql = "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = :t"
            if await conn.scalar(text(sql), {"t": table}) is None:
                return None
            sql = "SELECT reltuples FROM pg_class WHERE relname = :t AND relkind = 'r'"
            return float(await conn.scalar(text(sql), {"t": table}) or 0)
        exists = "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'"
        if await conn.scalar(text(exists)) is None:
            return None
        sql = "SELECT stat FROM sqlite_stat1 WHERE tbl = :t LIMIT 1"
        stat = await conn.scalar(text(sql), {"t": table})
        return None if stat is None else float(str(stat).split()[0])


def _pg(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


def _specs(n: int, start: int = 0) -> list[SubmitSpec]:
    return [
        parse_submit({"kind": "recall", "pnfsid": f"00AB{i:016X}", "path": f"/p/{i}"})
        for i in range(start, start + n)
    ]


async def test_a_catalog_import_leaves_the_catalog_analysed(engine: AsyncEngine) -> None:
    csv = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
        f"00AB{i:016X},V{i % 7:05d},{i},1000,atlas:tape,2020-01-01T00:00:00+00:00\n"
        for i in range(1, 301)
    )
    await import_csv(SimCatalogTables(session_factory(engine)), io.StringIO(csv), replace=True)
    assert await _analysed_rows(engine, "sim_objects") == 300


async def test_intake_past_the_threshold_analyses_requests(engine: AsyncEngine) -> None:
    analysed: list[str] = []
    upkeep = Upkeep(engine, 200, analysed.append)
    store = RequestStore(session_factory(engine), postgres=_pg(engine), statistics=upkeep)
    await store.submit(_specs(150))
    await upkeep.close()
    assert analysed == []
    await store.submit(_specs(100, start=150))
    await upkeep.close()
    assert sorted(analysed) == ["request_events", "requests"]
    assert await _analysed_rows(engine, "requests") == 250
    # Resubmitting open keys creates nothing: nothing more to analyse.
    await store.submit(_specs(250))
    await upkeep.close()
    assert len(analysed) == 2


async def test_upkeep_off_never_analyses(engine: AsyncEngine) -> None:
    store = RequestStore(session_factory(engine), postgres=_pg(engine))
    await store.submit(_specs(300))
    await store.statistics.close()
    assert await _analysed_rows(engine, "requests") is None


async def test_only_tssd_tables_are_analysed(engine: AsyncEngine) -> None:
    with pytest.raises(ValueError, match="not a table"):
        await analyse(engine, ["requests; DROP TABLE requests"])


@pytest.mark.postgres
async def test_queue_tables_have_autovacuum_settings(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        await ensure_schema(engine, auto_init=True)
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:t)"),
                {"t": ["requests", "request_events", "sim_objects"]},
            )
            options = {name: set(opts or ()) for name, opts in rows}
    finally:
        await engine.dispose()
    assert "autovacuum_vacuum_scale_factor=0.02" in options["requests"]
    assert "autovacuum_analyze_scale_factor=0.01" in options["requests"]
    assert "autovacuum_analyze_scale_factor=0.02" in options["request_events"]
    assert "autovacuum_analyze_scale_factor=0.02" in options["sim_objects"]

"""No statement of the request path walks a hot table, on either database, whatever the
statistics (issues 22 and 45).

A database is filled with 200,000 requests (open, finished long ago and lately, with one
event each) and a catalog of 200,000 objects in ``sim_objects`` and ``scsi_objects``
(tests/integration/plans_support.py), and then the real code is driven: submit, obtain
and poll through the HTTP API, claim, finish, cancel, retry, every listing filter,
``why``, status, queues, the scheduler's passes, the planner's resync, retention, the
catalog look-ups of both backends. Every SELECT, UPDATE and DELETE it sends is captured
as sent (SQLAlchemy's ``before_cursor_execute``, on every engine: SQLite's submits have
their own) and explained with its parameters: ``EXPLAIN (FORMAT JSON)`` on PostgreSQL,
``EXPLAIN QUERY PLAN`` on SQLite.

Each database runs twice: with statistics taken after the fill (an analysed database) and
with statistics taken on the empty schema before it (a fresh install that a catalog
import and a campaign filled before anything analysed it). A plan fails when it reads a
hot table by a sequential scan, by an index scan with no index condition unless it is
the bounded top of an id-ordered page, or by an index whose condition does not cover the
column the statement looks up (a key filtered after an index walk on ``kind``).

Two statements are left out by name because they read the whole set by design, off the
request path: the count of ``tssd.db.counts`` (in the background, at most every
``max_age_s`` on a large table) and the planner's full load ``tssd.db.scheduling.
PENDING`` (at start-up and every ``scheduler.resync_s``).

tssd's PostgreSQL connections plan every execution with its values
(``plan_cache_mode = force_custom_plan``, tssd.db.engine): a generic plan, which a
prepared statement may settle on after five runs, is what walked every recall in
issue 22. The test checks that setting on a connection of the daemon's engine and
explains each statement the same way.
"""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import plans_support as plans
import pytest
from aiohttp.test_utils import TestClient, TestServer
from plans_support import NOW, ROWS, TAPES
from plans_support import pnfsid as _pnfsid
from sqlalchemy import Engine, event, text
from sqlalchemy.dialects import postgresql, sqlite

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import ApiSettings, DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.db.admin import AdminStore
from tssd.db.pages import ListFilter
from tssd.db.plans import NO_SEQSCAN
from tssd.db.retention import SqlRetention, purge
from tssd.db.scheduling import PENDING
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.db.sim_catalog import SimCatalogTables
from tssd.metrics_db import refresh
from tssd.services import Services
from tssd.submit import parse_submit

COUNT_SQL = "GROUP BY requests.kind, requests.queue, requests.state"
STATISTICS = [pytest.param(True, id="analysed"), pytest.param(False, id="fresh")]


async def _drive(services: Services, tmp_path: Path) -> None:
    """Everything a site does to tssd, through the code that does it."""
    store, scheduler = services.store, services.scheduler
    await scheduler.start()
    async with TestClient(TestServer(make_app(services))) as client:
        bulk = [{"kind": "recall", "pnfsid": _pnfsid(i), "path": f"/pool/data/{_pnfsid(i)}"}
                for i in [*range(1, 50), *range(ROWS + 1, ROWS + 51)]]  # fmt: skip
        assert (await client.post("/v1/requests/bulk", json={"requests": bulk})).status == 200
        for i in (3, 7, ROWS + 100):  # open, finished (adopted), new
            body = {"kind": "recall", "pnfsid": _pnfsid(i), "path": f"/pool/data/{_pnfsid(i)}"}
            assert (await client.post("/v1/requests/obtain", json=body)).status in (200, 201)
            query = f"kind=recall&pnfsid={_pnfsid(i)}"
            assert (await client.get(f"/v1/requests/latest?{query}")).status == 200
        assert (await client.post("/v1/requests/7/reported")).status == 200
        filters = ["", "state=queued", "state=done", "queue=atlas", "state=queued&queue=cms",
                   "kind=migrate&state=queued", "state=active&kind=recall", "volume=V00042",
                   "state=failed", "state=cancelled", "queue=atlas&state=failed",
                   f"pnfsid={_pnfsid(42)}", "state=queued&after=150000"]  # fmt: skip
        for flt in filters:
            assert (await client.get(f"/v1/requests?limit=100&{flt}")).status == 200
        for path in ("/v1/requests/11", "/v1/requests/11/why", "/v1/requests/11/wait?timeout=0",
                     "/v1/status", "/v1/queues", "/v1/tapes?limit=100",
                     "/v1/tapes?limit=100&after=V00500"):  # fmt: skip
            assert (await client.get(path)).status == 200, path
        ids = {"ids": list(range(1, 2001))}
        assert (await client.post("/v1/requests/query", json=ids)).status == 200
        assert (await client.post("/v1/requests/21/cancel")).status == 200
        assert (await client.post("/v1/requests/21/retry")).status == 200
    volume = "V00042"
    claimed = await store.scheduling.claim_recalls(volume, "d0", 20)
    assert claimed
    await store.finish(claimed[0].id, "read")
    await store.requeue([r.id for r in claimed[1:]], "session ended")
    await scheduler.schedule_once(full=True)
    await scheduler.chooser.resync()
    await store.requeue_active("test")
    await refresh(services.gauges, services.metrics, services.settings.scheduler)
    await AdminStore(store.sessions).tape(volume)
    # Without the planner's index (fifo policy) the page's volumes come from the database.
    await AdminStore(store.sessions).tapes(100)
    await AdminStore(store.sessions).tapes(100, "V00500")
    deleted = await purge(SqlRetention(store.sessions), NOW - timedelta(days=30), batch=5000)
    assert deleted > 0
    # A poll adopting a new request spec through the store, for the generic LATEST plan.
    spec = parse_submit({"kind": "recall", "pnfsid": _pnfsid(5), "path": "/pool/data/x"})
    await store.obtain(spec, adopt_finished=True)
    await store.list_requests(ListFilter(state="failed", limit=10))
    await _catalogs(services)


async def _catalogs(services: Services) -> None:
    """The look-ups both backends make in their catalog tables."""
    keys = [_pnfsid(i) for i in range(1, 1200, 3)]
    for tables in (SimCatalogTables(services.store.sessions),
                   ScsiCatalogTables(services.store.sessions)):  # fmt: skip
        prefix = "sim" if isinstance(tables, SimCatalogTables) else "scsi"
        assert await tables.of_pnfsids(keys)
        assert await tables.with_bfids([f"{prefix}-{i}" for i in range(1, 600, 7)])
        assert await tables.of_pnfsid_sized(_pnfsid(17), 10**9)
        assert await tables.get(f"{prefix}-5") is not None
    sim = SimCatalogTables(services.store.sessions)
    assert await sim.known_bfids([f"sim-{i}" for i in range(1, 600, 7)])
    assert await sim.tape(f"V{1:05d}") is not None


async def _settings(tmp_path: Path, url: str) -> Settings:
    return Settings(
        home=str(tmp_path / "home"),
        # The synthetic rows name paths under /pool (never opened: no drive reads them).
        api=ApiSettings(pool_roots="/pool"),
        database=DatabaseSettings(url=url),
        sim=SimSettings(drives=2, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(tick_s=60.0),
    )


async def _capture_run(services: Services, tmp_path: Path, skip: set[str]) -> list[Any]:
    """The statements on hot tables that driving tssd sends: (sql, parameters, whether
    the transaction had turned sequential scans off, as tssd.db.plans does)."""
    captured: dict[str, tuple[str, Any, bool]] = {}

    def capture(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if sql == str(NO_SEQSCAN):
            conn.info["no_seqscan"] = True
            return
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb not in ("SELECT", "UPDATE", "DELETE", "WITH") or COUNT_SQL in sql:
            return
        if sql in skip or "pg_catalog" in sql or "alembic_version" in sql:
            return
        if "sqlite_master" in sql or sql.startswith(("PRAGMA", "ANALYZE")):
            return
        if many:
            params = params[0] if params else ()
        flag = bool(conn.info.get("no_seqscan"))
        captured.setdefault(sql, (sql, tuple(params or ()), flag))

    def begin(conn: Any) -> None:  # SET LOCAL lasts for one transaction
        conn.info.pop("no_seqscan", None)

    # Every engine: on a SQLite file the submits have their own (tssd.db.submits).
    event.listen(Engine, "before_cursor_execute", capture)
    event.listen(Engine, "begin", begin)
    try:
        await _drive(services, tmp_path)
    finally:
        event.remove(Engine, "before_cursor_execute", capture)
        event.remove(Engine, "begin", begin)
    touching = [v for v in captured.values() if any(t in v[0] for t in plans.HOT)]
    assert len(touching) >= 20, f"too few statements captured: {len(touching)}"
    return touching


async def _import_small_catalog(services: Services) -> None:
    # The catalog as tssctl catalog import writes it (tapes included); seq past the fill's.
    catalog = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
        f"{_pnfsid(i)},V{i % TAPES:05d},{i},1000,atlas:tape,2020-01-01T00:00:00+00:00\n"
        for i in range(ROWS + 1, ROWS + 60)
    )
    await import_csv(SimCatalogTables(services.store.sessions), io.StringIO(catalog), replace=True)


def _report(bad: dict[str, list[str]]) -> str:
    return "\n\n".join(f"{sql}\n  -> {'; '.join(p)}" for sql, p in bad.items())


@pytest.mark.postgres
@pytest.mark.timeout(300)
@pytest.mark.parametrize("analysed", STATISTICS)
async def test_no_request_path_statement_walks_the_tables(
    tmp_path: Path, pg_url: str, analysed: bool
) -> None:
    settings = await _settings(tmp_path, pg_url)
    pending_sql = str(PENDING.compile(dialect=postgresql.asyncpg.dialect()))
    async with build_services(settings) as services:
        await _import_small_catalog(services)
        if not analysed:
            await plans.analyse_postgres(pg_url)  # statistics of the empty schema
        await plans.fill_postgres(pg_url, analyse=analysed)
        async with services.store.engine.connect() as conn:
            mode = await conn.scalar(text("SHOW plan_cache_mode"))
        assert mode == "force_custom_plan"
        touching = await _capture_run(services, tmp_path, {pending_sql})
    bad = await plans.pg_explain(pg_url, touching)
    assert not bad, f"{len(bad)} statements walk a table:\n{_report(bad)}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("statistics", ["analysed", "fresh", "none"])
async def test_no_request_path_statement_walks_the_tables_on_sqlite(
    tmp_path: Path, sqlite_url: str, statistics: str
) -> None:
    """As on PostgreSQL, and also never analysed at all (SQLite's own default)."""
    settings = await _settings(tmp_path, sqlite_url)
    pending_sql = str(PENDING.compile(dialect=sqlite.dialect()))
    async with build_services(settings) as services:
        await _import_small_catalog(services)
        if statistics == "fresh":
            await asyncio.to_thread(plans.analyse_sqlite, sqlite_url)
        analyse = statistics == "analysed"
        await asyncio.to_thread(plans.fill_sqlite, sqlite_url, analyse=analyse)
        touching = await _capture_run(services, tmp_path, {pending_sql})
    bad = await asyncio.to_thread(plans.sqlite_explain, sqlite_url, touching)
    assert not bad, f"{len(bad)} statements walk a table:\n{_report(bad)}"

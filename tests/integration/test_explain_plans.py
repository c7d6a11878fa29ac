"""No statement of the request path walks ``requests`` or ``request_events`` (issue 22).

A PostgreSQL database is filled with 200,000 requests (open, finished long ago and lately,
with one event each) by ``COPY``, analysed, and then the real code is driven: submit,
obtain and poll through the HTTP API, claim, finish, cancel, retry, every listing filter,
``why``, status, queues, the scheduler's passes, the planner's resync, retention. Every
SELECT, UPDATE and DELETE it sends is captured as sent (SQLAlchemy's
``before_cursor_execute``) and explained with its parameters (the plan of every
execution, see below). A plan fails when it
reads one of the two tables by a sequential scan, or by an index scan with no index
condition unless it is the bounded top of an id-ordered page (a Limit over an unfiltered
index scan).

Two statements are left out by name because they read the whole set by design, off the
request path: the count of ``tssd.db.counts`` (in the background, at most every
``max_age_s`` on a large table) and the planner's full load ``tssd.db.scheduling.
PENDING`` (at start-up and every ``scheduler.resync_s``).

tssd's PostgreSQL connections plan every execution with its values
(``plan_cache_mode = force_custom_plan``, tssd.db.engine): a generic plan, which a
prepared statement may settle on after five runs, is what walked every recall in the
issue. The test checks that setting on a connection of the daemon's engine and explains
each statement the same way.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import event, text
from sqlalchemy.dialects import postgresql

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import ApiSettings, DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.db.admin import AdminStore
from tssd.db.models import State
from tssd.db.retention import purge
from tssd.db.scheduling import PENDING
from tssd.db.store import ListFilter
from tssd.metrics_db import refresh
from tssd.services import Services
from tssd.submit import parse_submit

pytestmark = pytest.mark.postgres

ROWS = 200_000
TAPES = 1000
HOT = ("requests", "request_events")
#: tssd.db.counts: a deliberate count of the whole table, off the request path.
PARTIAL: set[str] = set()
#: An unconditioned index scan under a Limit may read at most this share of the table.
BOUNDED_SHARE = 0.05
COUNT_SQL = "GROUP BY requests.kind, requests.queue, requests.state"
NOW = datetime.now(UTC)


def _pnfsid(i: int) -> str:
    return f"00AB{i:016X}"


def _request_rows() -> Iterator[tuple[Any, ...]]:
    """(id, kind, state, key, pnfsid, path, size, queue, priority, volume, position,
    created_at, finished_at, updated_at, hsm_type, hsm_instance, attempts) of the
    requests the database starts with."""
    rnd = random.Random(22)
    for i in range(1, ROWS + 1):
        if i % 10 < 5:  # half queued recalls, located
            kind, state, finished = "recall", "queued", None
        elif i % 10 < 6:
            kind, state, finished = "recall", "active", None
        elif i % 10 < 9:  # finished long ago and lately
            kind, state = "recall", "done"
            finished = NOW - timedelta(days=rnd.choice((1, 10, 40, 90)))
        elif i % 20 == 9:
            kind, state, finished = "migrate", "queued", None
        else:
            kind, state, finished = "recall", "failed", NOW - timedelta(days=2)
        created = NOW - timedelta(days=100) + timedelta(seconds=i)
        volume = f"V{i % TAPES:05d}" if kind == "recall" else None
        pnfsid = _pnfsid(i)
        yield (i, kind, state, pnfsid, pnfsid, f"/pool/data/{pnfsid}", 10**9,
               rnd.choice(("default", "atlas", "cms")), 0, volume, i // TAPES,
               created, finished, finished or created, "osm", "osm", 0)  # fmt: skip


async def _fill(url: str) -> None:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        # The NOTIFY triggers are for live daemons; 200,000 notifications only slow the fill.
        await conn.execute("ALTER TABLE requests DISABLE TRIGGER USER")
        columns = ["id", "kind", "state", "key", "pnfsid", "path", "size", "queue",
                   "priority", "volume", "position", "created_at", "finished_at",
                   "updated_at", "hsm_type", "hsm_instance", "attempts"]  # fmt: skip
        rows = list(_request_rows())
        await conn.copy_records_to_table("requests", records=rows, columns=columns)
        events = [
            (r[0], r[11], None, "queued", "submitted") for r in rows
        ]  # one event each, as submit leaves it
        await conn.copy_records_to_table(
            "request_events",
            records=events,
            columns=["request_id", "at", "from_state", "to_state", "reason"],
        )
        await conn.execute("SELECT setval('requests_id_seq', $1)", ROWS)
        await conn.execute("ALTER TABLE requests ENABLE TRIGGER USER")
        await conn.execute("ANALYZE requests")
        await conn.execute("ANALYZE request_events")
    finally:
        await conn.close()


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
    await store.finish(claimed[0].id, State.DONE, "read")
    await store.transition([r.id for r in claimed[1:]], (State.ACTIVE,), State.QUEUED)
    await scheduler.schedule_once(full=True)
    await scheduler.chooser.resync()
    await store.requeue_active("test")
    await refresh(services)
    await AdminStore(store.sessions).tape(volume)
    # Without the planner's index (fifo policy) the page's volumes come from the database.
    await AdminStore(store.sessions).tapes(100)
    await AdminStore(store.sessions).tapes(100, "V00500")
    deleted = await purge(store.sessions, NOW - timedelta(days=30), batch=5000)
    assert deleted > 0
    # A poll adopting a new request spec through the store, for the generic LATEST plan.
    spec = parse_submit({"kind": "recall", "pnfsid": _pnfsid(5), "path": "/pool/data/x"})
    await store.obtain(spec, adopt_finished=True)
    await store.list_requests(ListFilter(state="failed", limit=10))


def _offences(
    plan: dict[str, Any], tables: dict[str, str], rows: dict[str, float], limit: float | None
) -> list[str]:
    """What in *plan* walks a hot table; *limit*: the rows a Limit above will take."""
    found = []
    node = plan["Node Type"]
    table = plan.get("Relation Name") or tables.get(plan.get("Index Name", ""))
    if table in HOT:
        if node == "Seq Scan":
            found.append(f"Seq Scan on {table}")
        elif "Index" in node and not _selective(plan, rows[table], limit):
            found.append(f"{node} on {table} by {plan['Index Name']} without a condition")
    if node == "Limit":
        limit = plan["Plan Rows"]
    for child in plan.get("Plans", []):
        found.extend(_offences(child, tables, rows, limit))
    return found


def _selective(scan: dict[str, Any], table_rows: float, limit: float | None) -> bool:
    """An index condition, a partial index (it holds only the rows its predicate selects:
    ix_requests_unlocated), or a bounded page."""
    if "Index Cond" in scan or scan["Index Name"] in PARTIAL:
        return True
    return _bounded(scan, table_rows, limit)


def _bounded(scan: dict[str, Any], table_rows: float, limit: float | None) -> bool:
    """An id-ordered page: a Limit over an index scan that stops after a few rows.

    With a filter the scan reads about limit / (fraction of rows passing) rows before it
    has its page: bounded while that is under 5 % of the table (a dense state or queue),
    a walk when the matches are rare, which is when PostgreSQL picks the selective index.
    """
    if limit is None:
        return False
    passing = max(scan["Plan Rows"], 1) / max(table_rows, 1)
    return limit / passing <= BOUNDED_SHARE * table_rows


async def _explain(url: str, captured: list[tuple[str, Any]]) -> dict[str, list[str]]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    bad: dict[str, list[str]] = {}
    try:
        indexes = await conn.fetch(
            "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE tablename = ANY($1)",
            list(HOT),
        )
        index_table = {r["indexname"]: r["tablename"] for r in indexes}
        # A partial index holds only the rows its predicate selects: a scan of it is
        # selective without an index condition (ix_requests_unlocated).
        PARTIAL.update(r["indexname"] for r in indexes if " WHERE " in r["indexdef"])
        rows = dict(
            await conn.fetch(
                "SELECT relname, reltuples FROM pg_class WHERE relname = ANY($1)", list(HOT)
            )
        )
        # tssd's own connections plan every execution with its values (tssd.db.engine).
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        for sql, params in captured:
            plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *params)
            if problems := _offences(json.loads(plan)[0]["Plan"], index_table, rows, None):
                bad[sql] = [*problems, f"parameters {params!r}"]
    finally:
        await conn.close()
    return bad


async def test_no_request_path_statement_walks_the_tables(tmp_path: Path, pg_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        # The synthetic rows name paths under /pool (never opened: no drive reads them).
        api=ApiSettings(pool_roots="/pool"),
        database=DatabaseSettings(url=pg_url),
        sim=SimSettings(drives=2, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(tick_s=60.0),
    )
    captured: dict[str, tuple[str, Any]] = {}
    pending_sql = str(PENDING.compile(dialect=postgresql.asyncpg.dialect()))

    def capture(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        verb = sql.lstrip().split(None, 1)[0].upper()
        if verb not in ("SELECT", "UPDATE", "DELETE", "WITH") or COUNT_SQL in sql:
            return
        if sql == pending_sql:
            return
        if "pg_catalog" in sql or "alembic_version" in sql:
            return
        if many:
            params = params[0] if params else ()
        captured.setdefault(sql, (sql, tuple(params or ())))

    async with build_services(settings) as services:
        await _fill(pg_url)
        catalog = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
            f"{_pnfsid(i)},V{i % TAPES:05d},{i},1000,atlas:tape,2020-01-01T00:00:00+00:00\n"
            for i in range(ROWS + 1, ROWS + 60)
        )
        await import_csv(services.store.sessions, io.StringIO(catalog), replace=True)
        async with services.store.engine.connect() as conn:
            mode = await conn.scalar(text("SHOW plan_cache_mode"))
        assert mode == "force_custom_plan"
        engine = services.store.engine.sync_engine
        event.listen(engine, "before_cursor_execute", capture)
        try:
            await _drive(services, tmp_path)
        finally:
            event.remove(engine, "before_cursor_execute", capture)
    touching = [v for v in captured.values() if any(t in v[0] for t in HOT)]
    assert len(touching) >= 20, f"too few statements captured: {len(touching)}"
    bad = await _explain(pg_url, touching)
    report = "\n\n".join(f"{sql}\n  -> {'; '.join(p)}" for sql, p in bad.items())
    assert not bad, f"{len(bad)} statements walk a table:\n{report}"

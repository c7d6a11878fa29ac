"""Fills and plan checks of tests/integration/test_explain_plans.py, for both databases.

The fills write rows as a site's database holds them after months (open and finished
requests with their events, a catalog of every object), directly: by ``COPY`` on
PostgreSQL, by ``executemany`` on SQLite. Which statistics the planner has is the test's
choice: taken after the fill (an analysed database) or taken on the empty schema before
it (a fresh install that a campaign then filled).

A plan offends when it walks a hot table (a sequential scan, an index scan with no
condition that is not the bounded top of an unfiltered id-ordered page) or when a statement looks
rows up by a set of keys (``t.key IN (...)``, ``t.id = $1``) and the scan of that table
does not have the looked-up column in its index condition: the key filtered after an
index walk on ``kind`` or ``state``, which is what cost a fresh install 159,900 rows per
statement.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

ROWS = 200_000
TAPES = 1000
HOT = ("requests", "request_events", "sim_objects", "scsi_objects")
#: Columns looked up by a set of values or one bound value: each must be in the index
#: condition of the scan of its table.
LOOKUP = ("key", "pnfsid", "bfid", "request_id", "id")
#: An unconditioned index scan under a Limit may read at most this share of the table.
BOUNDED_SHARE = 0.05
NOW = datetime.now(UTC)
REQUEST_COLUMNS = ["id", "kind", "state", "key", "pnfsid", "path", "size", "queue",
                   "priority", "volume", "position", "created_at", "finished_at",
                   "updated_at", "hsm_type", "hsm_instance", "attempts"]  # fmt: skip
EVENT_COLUMNS = ["request_id", "at", "from_state", "to_state", "reason"]
OBJECT_COLUMNS = ["bfid", "pnfsid", "volume", "seq", "offset", "size", "storage_class",
                  "written_at", "has_data"]  # fmt: skip
SCSI_COLUMNS = ["bfid", "pnfsid", "volume", "seq", "block", "offset", "size", "adler32",
                "storage_class", "written_at"]  # fmt: skip


def pnfsid(i: int) -> str:
    return f"00AB{i:016X}"


def request_rows() -> Iterator[tuple[Any, ...]]:
    """The requests the database starts with, in REQUEST_COLUMNS order."""
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
        key = pnfsid(i)
        yield (i, kind, state, key, key, f"/pool/data/{key}", 10**9,
               rnd.choice(("default", "atlas", "cms")), 0, volume, i // TAPES,
               created, finished, finished or created, "osm", "osm", 0)  # fmt: skip


def object_rows() -> Iterator[tuple[Any, ...]]:
    """One copy of every filled request's file in the simulated catalog."""
    written = NOW - timedelta(days=400)
    for i in range(1, ROWS + 1):
        yield (f"sim-{i}", pnfsid(i), f"V{i % TAPES:05d}", i, 0, 10**9, "atlas:tape",
               written, False)  # fmt: skip


def scsi_rows() -> Iterator[tuple[Any, ...]]:
    written = NOW - timedelta(days=400)
    for i in range(1, ROWS + 1):
        yield (f"scsi-{i}", pnfsid(i), f"S{i % TAPES:05d}", i, 2 * i, 0, 10**9, "00000001",
               "atlas:tape", written)  # fmt: skip


def _event_rows(requests: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    # One event each, as submit leaves it.
    return [(r[0], r[11], None, "queued", "submitted") for r in requests]


async def fill_postgres(url: str, *, analyse: bool) -> None:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        # The NOTIFY triggers are for live daemons; 200,000 notifications only slow the fill.
        await conn.execute("ALTER TABLE requests DISABLE TRIGGER USER")
        rows = list(request_rows())
        await conn.copy_records_to_table("requests", records=rows, columns=REQUEST_COLUMNS)
        await conn.copy_records_to_table(
            "request_events", records=_event_rows(rows), columns=EVENT_COLUMNS
        )
        await conn.copy_records_to_table(
            "sim_objects", records=list(object_rows()), columns=OBJECT_COLUMNS
        )
        await conn.copy_records_to_table(
            "scsi_objects", records=list(scsi_rows()), columns=SCSI_COLUMNS
        )
        await conn.execute("SELECT setval('requests_id_seq', $1)", ROWS)
        await conn.execute("ALTER TABLE requests ENABLE TRIGGER USER")
        if analyse:
            await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def analyse_postgres(url: str) -> None:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def _sqlite_value(value: Any) -> Any:
    # As SQLAlchemy's SQLite DateTime stores them.
    return value.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(value, datetime) else value


def _insert(db: sqlite3.Connection, table: str, columns: list[str], rows: Any) -> None:
    names = ", ".join(f'"{c}"' for c in columns)
    marks = ", ".join("?" for _ in columns)
    db.executemany(
        f"INSERT INTO {table} ({names}) VALUES ({marks})",
        ([_sqlite_value(v) for v in row] for row in rows),
    )


def sqlite_path(url: str) -> str:
    return url.split(":///", 1)[1]


def fill_sqlite(url: str, *, analyse: bool) -> None:
    db = sqlite3.connect(sqlite_path(url))
    try:
        rows = list(request_rows())
        _insert(db, "requests", REQUEST_COLUMNS, rows)
        _insert(db, "request_events", EVENT_COLUMNS, _event_rows(rows))
        _insert(db, "sim_objects", OBJECT_COLUMNS, object_rows())
        _insert(db, "scsi_objects", SCSI_COLUMNS, scsi_rows())
        db.commit()
        if analyse:
            db.execute("ANALYZE")
            db.commit()
    finally:
        db.close()


def analyse_sqlite(url: str) -> None:
    db = sqlite3.connect(sqlite_path(url))
    try:
        db.execute("ANALYZE")
        db.commit()
    finally:
        db.close()


def looked_up(sql: str) -> set[tuple[str, str]]:
    """(table, column) pairs the statement looks up by a set or one bound value."""
    tables = "|".join(HOT)
    columns = "|".join(LOOKUP)
    # A set given as values, not a subquery (a claim's ids come from its own CTE).
    pattern = rf"\b({tables})\.({columns}) (?:IN \((?!SELECT)|= (?:\$\d|\?|%\())"
    return {(m[0], m[1]) for m in re.findall(pattern, sql)}


# -- PostgreSQL -------------------------------------------------------------------------


def pg_offences(
    plan: dict[str, Any],
    tables: dict[str, str],
    rows: dict[str, float],
    keys: set[tuple[str, str]],
    limit: float | None = None,
) -> list[str]:
    """What in *plan* walks a hot table or filters a looked-up key after an index walk;
    *limit*: the rows a Limit above will take."""
    found = []
    node = plan["Node Type"]
    table = plan.get("Relation Name") or tables.get(plan.get("Index Name", ""))
    if table in HOT:
        if node == "Seq Scan":
            found.append(f"Seq Scan on {table}")
        elif "Index" in node and not _selective(plan, tables, rows[table], limit):
            found.append(f"{node} on {table} by {plan['Index Name']} without a condition")
        if "Scan" in node:
            found.extend(_uncovered(plan, table, keys))
    if node == "Limit":
        limit = plan["Plan Rows"]
    for child in plan.get("Plans", []):
        found.extend(pg_offences(child, tables, rows, keys, limit))
    return found


def _uncovered(scan: dict[str, Any], table: str, keys: set[tuple[str, str]]) -> list[str]:
    """The looked-up columns of *table* missing from the scan's condition (a Bitmap Heap
    Scan's recheck condition is its index scans' conditions)."""
    if scan["Node Type"] == "Bitmap Index Scan":
        return []  # its Bitmap Heap Scan is checked
    cond = scan.get("Index Cond", "") + scan.get("Recheck Cond", "")
    return [
        f"{scan['Node Type']} on {table} ({scan.get('Index Name', '-')}) filters {column}: "
        f"condition {cond or 'none'!r}, filter {scan.get('Filter', '')!r}"
        for t, column in sorted(keys)
        if t == table and not re.search(rf"\b{column}\b", cond)
    ]


def _selective(
    scan: dict[str, Any], partial: dict[str, str], table_rows: float, limit: float | None
) -> bool:
    """An index condition, a partial index (it holds only the rows its predicate selects:
    ix_requests_unlocated), or a bounded page."""
    if "Index Cond" in scan or scan["Index Name"] in PARTIAL:
        return True
    return _bounded(scan, table_rows, limit)


#: Partial indexes of the hot tables, filled from pg_indexes.
PARTIAL: set[str] = set()


def _bounded(scan: dict[str, Any], table_rows: float, limit: float | None) -> bool:
    """An id-ordered page: a Limit over an index scan with no filter, which stops after a
    few rows.

    With a filter the scan reads about limit / (fraction of rows passing) rows before it
    has its page only when the matches spread evenly over the ids, as PostgreSQL's
    statistics suppose. They do not: a site's history is older than its queue, and a page
    of queued requests by the primary key read every finished one first (0.7 s at a
    million). A filtered page must be read from an index that has the filter in its
    condition (tssd.db.pages).
    """
    if limit is None or scan.get("Filter"):
        return False
    passing = max(scan["Plan Rows"], 1) / max(table_rows, 1)
    return limit / passing <= BOUNDED_SHARE * table_rows


async def pg_explain(url: str, captured: list[tuple[str, Any, bool]]) -> dict[str, list[str]]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    bad: dict[str, list[str]] = {}
    try:
        indexes = await conn.fetch(
            "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE tablename = ANY($1)",
            list(HOT),
        )
        index_table = {r["indexname"]: r["tablename"] for r in indexes}
        PARTIAL.update(r["indexname"] for r in indexes if " WHERE " in r["indexdef"])
        rows = dict(
            await conn.fetch(
                "SELECT relname, reltuples FROM pg_class WHERE relname = ANY($1)", list(HOT)
            )
        )
        # A never-analysed table has reltuples -1: the fill's size is what it holds.
        rows = {t: (n if n > 0 else float(ROWS)) for t, n in rows.items()}
        # tssd's own connections plan every execution with its values (tssd.db.engine).
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        for sql, params, no_seqscan in captured:
            # As the statement ran: tssd turns sequential scans off for some look-ups.
            await conn.execute(f"SET enable_seqscan = {'off' if no_seqscan else 'on'}")
            plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *params)
            top = json.loads(plan)[0]["Plan"]
            if problems := pg_offences(top, index_table, rows, looked_up(sql)):
                bad[sql] = [*problems, f"parameters {params!r}"[:300]]
    finally:
        await conn.close()
    return bad


# -- SQLite -----------------------------------------------------------------------------


def sqlite_offences(sql: str, details: list[str]) -> list[str]:
    """What in the EXPLAIN QUERY PLAN *details* walks a hot table or filters a looked-up
    key. A scan is a page when the statement has a LIMIT, no WHERE and no sort of its own
    (the scan runs in the order asked for and stops); a filtered walk is one whatever its
    LIMIT: it reads every row that does not match before the page (see _bounded)."""
    found = []
    keys = looked_up(sql)
    page = " LIMIT " in sql and " WHERE " not in sql
    page = page and not any("TEMP B-TREE" in d for d in details)
    for detail in details:
        words = detail.split()
        if len(words) < 2 or words[0] not in ("SCAN", "SEARCH") or words[1] not in HOT:
            continue
        table = words[1]
        if words[0] == "SCAN" and not page:
            found.append(detail)
            continue
        cond = detail.split("(", 1)[1] if "(" in detail else ""
        cond = cond.replace("rowid", "id")
        found.extend(
            f"{detail}: filters {column}"
            for t, column in sorted(keys)
            if t == table and not re.search(rf"\b{column}[=<>]", cond)
        )
    return found


def sqlite_explain(url: str, captured: list[tuple[str, Any, bool]]) -> dict[str, list[str]]:
    db = sqlite3.connect(sqlite_path(url))
    bad: dict[str, list[str]] = {}
    try:
        for sql, params, _ in captured:
            plan = db.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
            details = [row[3] for row in plan]
            if problems := sqlite_offences(sql, details):
                bad[sql] = [*problems, f"parameters {params!r}"[:300]]
    finally:
        db.close()
    return bad

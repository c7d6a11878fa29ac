"""Planner statistics kept current where tssd itself grows or shrinks a table.

A fresh install's statistics are those of empty tables; a campaign of a million recalls,
a catalog import or a retention round changes a table faster than a site's autovacuum
(or nobody, on SQLite) re-analyses it. tssd's hot statements do not depend on statistics
(tssd.db.plans), but every other plan does: so tssd analyses what it changed itself,
once the rows it changed since the last time pass ``database.analyze_rows`` and a tenth of
the table (PostgreSQL's own ``autovacuum_analyze_scale_factor``).

``ANALYZE`` runs in the background on the async engine (asyncpg; on SQLite aiosqlite's
thread), never on the event loop; on SQLite with ``PRAGMA analysis_limit`` so that a
table of millions costs a bounded read, not a full one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import structlog
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = structlog.get_logger("tssd.db.statistics")

#: The tables tssd analyses, and no other name reaches a statement.
TABLES = frozenset(
    {"requests", "request_events", "sim_objects", "sim_tapes", "scsi_objects", "scsi_tapes"}
)
#: The share of a table that must have changed since its last ANALYZE.
SHARE = 0.1
#: SQLite: rows read per index by ANALYZE (its documented approximate mode).
SQLITE_ANALYSIS_LIMIT = 1000


async def analyse(engine: AsyncEngine, tables: Iterable[str]) -> dict[str, float]:
    """ANALYZE *tables*; return each one's row estimate afterwards."""
    names = sorted(set(tables))
    unknown = set(names) - TABLES
    if unknown:
        raise ValueError(f"not a table tssd analyses: {sorted(unknown)}")
    async with engine.begin() as conn:
        postgres = conn.dialect.name == "postgresql"
        if not postgres:
            await conn.execute(text(f"PRAGMA analysis_limit = {SQLITE_ANALYSIS_LIMIT}"))
        estimates = {}
        for name in names:
            await conn.execute(text(f"ANALYZE {name}"))
            estimates[name] = await _estimate(conn, name, postgres)
    return estimates


async def _estimate(conn: AsyncConnection, table: str, postgres: bool) -> float:
    if postgres:
        sql = "SELECT reltuples FROM pg_class WHERE relname = :t AND relkind = 'r'"
        return float(await conn.scalar(text(sql), {"t": table}) or 0)
    # sqlite_stat1's first number of an index's row is the table's row count.
    sql = "SELECT stat FROM sqlite_stat1 WHERE tbl = :t LIMIT 1"
    stat = await conn.scalar(text(sql), {"t": table})
    return float(str(stat).split()[0]) if stat else 0.0


class Upkeep:
    """Counts the rows tssd changes per table and analyses a table in the background when
    they are many (see the module docstring); *min_rows* 0 turns it off."""

    def __init__(
        self,
        engine: AsyncEngine,
        min_rows: int,
        counted: Callable[[str], None] | None = None,
    ) -> None:
        self._engine = engine
        self._min_rows = min_rows
        self._counted = counted
        self._changed: dict[str, int] = {}
        self._known: dict[str, float] = {}
        self._running: dict[str, asyncio.Task[None]] = {}

    def changed(self, rows: int, *tables: str) -> None:
        """*rows* rows of each of *tables* were written or deleted."""
        if self._min_rows <= 0 or rows <= 0:
            return
        for table in tables:
            changed = self._changed.get(table, 0) + rows
            self._changed[table] = changed
            due = max(self._min_rows, SHARE * self._known.get(table, 0.0))
            if changed >= due and table not in self._running:
                self._running[table] = asyncio.create_task(self._analyse(table, changed))

    async def _analyse(self, table: str, changed: int) -> None:
        start = time.monotonic()
        try:
            estimates = await analyse(self._engine, [table])
        except SQLAlchemyError as exc:  # the next batch of changes tries again
            log.warning("db.analyze_failed", table=table, error=str(exc)[:200])
            return
        finally:
            del self._running[table]
        self._changed[table] = max(0, self._changed.get(table, 0) - changed)
        self._known[table] = estimates[table]
        if self._counted is not None:
            self._counted(table)
        log.info("db.analyzed", table=table, rows_changed=changed, rows=int(estimates[table]),
                 duration_s=round(time.monotonic() - start, 3))  # fmt: skip

    async def close(self) -> None:
        """Wait for a running ANALYZE (bounded: a sampled read)."""
        running = list(self._running.values())
        if running:
            await asyncio.gather(*running, return_exceptions=True)

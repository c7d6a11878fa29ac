"""Statements whose plan does not wait for statistics.

A fresh install has statistics of empty tables (or none) until something analyses them,
and a campaign fills the queue faster than autovacuum's threshold notices. A look-up by a
set of keys must be served by an index condition on that key whatever the statistics say:

- SQLite: ``INDEXED BY`` names the index; SQLite refuses the statement rather than plan
  it another way (:func:`sqlite_indexed`).
- PostgreSQL, a unique key: one index probe per key (:func:`per_key`), which the planner
  knows returns at most one row from the unique index alone, without statistics.
- PostgreSQL, a non-unique key: without statistics PostgreSQL guesses that each value
  matches 0.5 % of the table, so 500 keys "match" all of it and a sequential scan looks
  cheaper; :func:`no_seqscan` takes that choice away for the transaction.
- A state condition beside a set of ids is compared through ``coalesce`` (:func:`unindexed`),
  so that no state index competes with the primary key.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Connection,
    Select,
    TextClause,
    bindparam,
    func,
    select,
    text,
    true,
)
from sqlalchemy.dialects import sqlite

_POSTCOMPILE = re.compile(r"\(__\[POSTCOMPILE_(\w+)\]\)")


def sqlite_indexed(stmt: Select[Any], table: str, index: str) -> TextClause:
    """*stmt* (named bind parameters only) with ``INDEXED BY index`` on *table*: SQLite's
    dialect has no table hints, so the statement is compiled once and spelled out."""
    sql = str(stmt.compile(dialect=sqlite.dialect(paramstyle="named")))
    spelled = re.sub(rf"\bFROM {table}\b", f"FROM {table} INDEXED BY {index}", sql, count=1)
    if spelled == sql:
        raise ValueError(f"no FROM {table} in {sql!r}")
    expanding = _POSTCOMPILE.findall(spelled)
    spelled = _POSTCOMPILE.sub(r":\1", spelled)
    clause = text(spelled).bindparams(*(bindparam(n, expanding=True) for n in expanding))
    return clause.columns(*stmt.selected_columns)  # type: ignore[return-value]


def per_key(keys_param: str, key_type: Any, inner: Any) -> Select[Any]:
    """PostgreSQL: for each element of the array *keys_param*, the rows *inner* (a
    function of the key column) selects, as a LATERAL subquery: the planner probes the
    index once per key instead of costing the whole set at once."""
    keys = (
        func.unnest(bindparam(keys_param, type_=ARRAY(key_type)))
        .table_valued("k")
        .render_derived(name="keys", with_types=False)
    )
    found = inner(keys.c.k).lateral("found")
    return select(found).select_from(keys).join(found, true())


#: PostgreSQL: no sequential scan for the rest of the transaction.
NO_SEQSCAN = text("SET LOCAL enable_seqscan = off")


def no_seqscan(conn: Connection) -> None:
    """PostgreSQL: no sequential scan for the rest of *conn*'s transaction (for look-ups by
    a set of keys of a column without a unique index); nothing on SQLite."""
    if conn.dialect.name == "postgresql":
        conn.execute(NO_SEQSCAN)


def unindexed(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """*column* as no index can serve: the condition on it is a filter of the rows another
    column's index found."""
    return func.coalesce(column, "")

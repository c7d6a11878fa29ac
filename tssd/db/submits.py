"""Recording submitted requests: core SQL, and on SQLite a writer thread off the event loop.

A bulk submit of 100,000 requests is 1,000 transactions of 100. Through the ORM each cost
about 20 ms of event-loop CPU (object loading, identity map, type processing), enough to
hold the loop past 100 ms when four clients submit at once (benchmarks/admission_load.py).
:func:`record` does the same work with core statements on a synchronous connection, so
that it can run anywhere: on PostgreSQL through ``AsyncConnection.run_sync`` (asyncpg is
async-only), on a SQLite file in :class:`SqliteWriter`'s single thread, where the loop
only waits for the answer. The rows returned have the attributes of a
:class:`~tssd.db.models.Request` that ``request_json`` and the poll index read.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    create_engine,
    event,
    insert,
    select,
    text,
)
from sqlalchemy.engine import URL

from tssd.db.models import OPEN_STATE_SQL, Request, RequestEvent, State, utcnow
from tssd.db.plans import per_key, sqlite_indexed
from tssd.db.polls import _COLUMN_KEY, _COLUMNS, REQUESTS, new_request
from tssd.submit import SubmitSpec

T = TypeVar("T")
#: Keys per ``IN`` look-up (SQLite's default limit of bound parameters is 999 on old builds).
CHUNK = 500
_INSERT = insert(REQUESTS).returning(*_COLUMNS, sort_by_parameter_order=True)
_EVENT_INSERT = insert(RequestEvent)

#: One result per spec: whether it created a request, and the request's row.
Results = list[tuple[bool, Any]]


def record(conn: Connection, specs: Sequence[SubmitSpec]) -> Results:
    """Record *specs* on *conn* (in its transaction); attach to open requests of the same
    key. Raises IntegrityError when a concurrent submit inserted one of the keys first."""
    existing = open_by_key(conn, specs)
    fresh: dict[tuple[str, str], dict[str, Any]] = {}
    for spec in specs:
        ident = (spec.kind.value, spec.key)
        if ident not in existing and ident not in fresh:
            fresh[ident] = {_COLUMN_KEY[k]: v for k, v in new_request(spec).items()}
    created: dict[tuple[str, str], Any] = {}
    if fresh:
        # One multi-row INSERT ... RETURNING per batch, not one statement per row.
        rows = conn.execute(_INSERT, list(fresh.values())).all()
        created = dict(zip(fresh, rows, strict=True))
        at = utcnow()
        events = [
            {"request_id": r.id, "at": at, "from_state": None,
             "to_state": State.QUEUED.value, "reason": "submitted"}
            for r in rows
        ]  # fmt: skip
        conn.execute(_EVENT_INSERT, events)
    return [
        (False, existing[ident]) if ident in existing else (True, created[ident])
        for ident in ((s.kind.value, s.key) for s in specs)
    ]


def open_by_key(conn: Connection, specs: Sequence[SubmitSpec]) -> dict[tuple[str, str], Any]:
    """The open requests with the kind and key of one of *specs*."""
    found: dict[tuple[str, str], Any] = {}
    by_kind: dict[str, list[str]] = {}
    for spec in specs:
        by_kind.setdefault(spec.kind.value, []).append(spec.key)
    stmt = _open_by_key(conn.dialect.name == "postgresql")
    for kind, keys in by_kind.items():
        unique = sorted(set(keys))
        for i in range(0, len(unique), CHUNK):
            params = {"b_kind": kind, "b_keys": unique[i : i + CHUNK]}
            for row in conn.execute(stmt, params).all():
                found[(row.kind, row.key)] = row
    return found


@functools.lru_cache(maxsize=2)
def _open_by_key(postgres: bool) -> Any:
    """The open requests of kind ``b_kind`` among the keys ``b_keys``, served by
    uq_requests_open_key on (kind, key) whatever the statistics: without them both
    databases walked the open recalls of the kind and filtered the keys (tssd.db.plans).
    The literal state condition is the index's predicate (with bound states PostgreSQL
    walked every recall)."""
    kind = Request.kind == bindparam("b_kind")
    if postgres:
        return per_key(
            "b_keys",
            Request.key.type,
            lambda key: select(*_COLUMNS).where(kind, Request.key == key, text(OPEN_STATE_SQL))
            .limit(1),
        )  # fmt: skip
    keys = Request.key.in_(bindparam("b_keys", expanding=True))
    stmt = select(*_COLUMNS).where(kind, keys, text(OPEN_STATE_SQL))
    return sqlite_indexed(stmt, "requests", "uq_requests_open_key")


def sqlite_file(url: URL) -> bool:
    """Whether *url* names a SQLite database file (another connection sees the same data)."""
    return url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")


class SqliteWriter:
    """A synchronous connection to the daemon's SQLite file, used by one worker thread.

    One thread: SQLite admits one writer at a time anyway, and a single thread competes
    with the event loop for the interpreter less than one per concurrent submit.
    """

    def __init__(self, url: URL, busy_timeout_s: float = 30.0) -> None:
        self.engine: Engine = create_engine(
            url.set(drivername="sqlite"), connect_args={"timeout": busy_timeout_s}
        )
        event.listen(self.engine, "connect", _pragmas)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tssd-writer")

    async def run(self, fn: Callable[[Connection, Sequence[SubmitSpec]], T],
                  specs: Sequence[SubmitSpec]) -> T:  # fmt: skip
        """``fn(conn, specs)`` in one transaction, in the writer thread."""

        def work() -> T:
            with self.engine.begin() as conn:
                return fn(conn, specs)

        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self.engine.dispose()


def _pragmas(dbapi_conn: Any, _record: Any) -> None:
    # As tssd.db.engine sets them on the daemon's async connections.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()

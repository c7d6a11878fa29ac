"""Queries on the object table of a backend catalog kept in tssd's database.

The simulated and the SCSI library keep their catalogs in tables of the same shape
(``sim_objects``, ``scsi_objects``); :class:`ObjectTable` holds the queries they share,
for the model it is given, and returns :class:`~tssd.backends.catalog.StoredObject`
records, never ORM rows. Database errors leave as
:class:`~tssd.backends.catalog.CatalogUnavailable` (:func:`translated`); the backends turn
that into their own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Connection, bindparam, delete, select

from tssd.backends.catalog import CatalogUnavailable, StoredObject
from tssd.db.engine import DatabaseError, Sessions, reading
from tssd.db.plans import no_seqscan, sqlite_indexed

#: Bound parameters per IN list.
IN_CHUNK = 500

P = ParamSpec("P")
T = TypeVar("T")


def translated(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """A catalog query whose database errors leave as CatalogUnavailable (the message
    is the database's: the backends quote it)."""

    @functools.wraps(method)
    async def query(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except DatabaseError as exc:
            raise CatalogUnavailable(str(exc)) from exc

    return query


def sim_object(row: Any) -> StoredObject:
    """The record of a ``sim_objects`` row (an ORM object or a core row)."""
    return StoredObject(
        row.bfid, row.pnfsid, row.volume, row.seq, row.offset, row.size, row.adler32,
        row.storage_class, row.written_at, has_data=row.has_data,
    )  # fmt: skip


def scsi_object(row: Any) -> StoredObject:
    """The record of a ``scsi_objects`` row (an ORM object or a core row)."""
    return StoredObject(
        row.bfid, row.pnfsid, row.volume, row.seq, row.offset, row.size, row.adler32,
        row.storage_class, row.written_at, block=row.block,
    )  # fmt: skip


def chunks(items: Sequence[Any], size: int = IN_CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ObjectTable:
    """The object rows of one catalog model (``SimObject`` or ``ScsiObject``), as the
    records *record* makes of them."""

    def __init__(
        self, sessions: Sessions, model: Any, record: Callable[[Any], StoredObject]
    ) -> None:
        self.sessions = sessions
        self.model = model
        self.record = record
        self._engine = sessions.kw["bind"]

    @translated
    async def get(self, bfid: str) -> StoredObject | None:
        """The object *bfid*, or None."""
        async with self.sessions() as session:
            obj = await session.get(self.model, bfid)
            return None if obj is None else self.record(obj)

    @translated
    async def with_bfids(self, bfids: Sequence[str]) -> list[StoredObject]:
        """The objects among *bfids* that exist."""
        rows = await reading(self._engine, _chunked, self.model, "bfid", bfids)
        return [self.record(row) for row in rows]

    @translated
    async def of_pnfsids(self, pnfsids: Sequence[str]) -> list[StoredObject]:
        """The copies of *pnfsids*, oldest first within each chunk of pnfsids."""
        rows = await reading(self._engine, _chunked, self.model, "pnfsid", pnfsids)
        return [self.record(row) for row in rows]

    @translated
    async def of_pnfsid_sized(self, pnfsid: str, size: int) -> list[StoredObject]:
        """The copies of *pnfsid* that have *size* bytes."""
        async with self.sessions() as session:
            rows = await session.scalars(
                select(self.model).where(self.model.pnfsid == pnfsid, self.model.size == size)
            )
            return [self.record(row) for row in rows]

    @translated
    async def delete(self, bfid: str) -> bool:
        """Delete the object *bfid*; False if there was none."""
        async with self.sessions() as session, session.begin():
            result = await session.execute(delete(self.model).where(self.model.bfid == bfid))
            return bool(getattr(result, "rowcount", 0))


@functools.lru_cache(maxsize=16)
def _objects_by(model: Any, column: str, postgres: bool) -> Any:
    """The objects of *model* whose *column* is in ``b_keys``, oldest copy first. Built
    once: the backends read the catalog per batch, a fifo simulation per file, and
    building the statement (and an ORM session for it) cost more than the read.

    Served by the index on *column* whatever the statistics (tssd.db.plans): after a
    catalog import into a fresh database SQLite's statistics of the empty table made a
    scan look cheaper, and PostgreSQL scanned the table until something analysed it."""
    table = model.__table__
    stmt = select(*table.c).where(table.c[column].in_(bindparam("b_keys", expanding=True)))
    stmt = stmt.order_by(table.c.written_at, table.c.bfid)
    if postgres:
        return stmt
    # The primary key's index is the one SQLite made for it (bfid is not the rowid).
    index = f"sqlite_autoindex_{table.name}_1" if column == "bfid" else f"ix_{table.name}_{column}"
    return sqlite_indexed(stmt, table.name, index)


def _chunked(conn: Connection, model: Any, column: str, keys: Sequence[str]) -> list[Any]:
    postgres = conn.dialect.name == "postgresql"
    stmt = _objects_by(model, column, postgres)
    if postgres:
        no_seqscan(conn)  # pnfsid has copies: no unique index tells the planner "few rows"
    found: list[Any] = []
    for chunk in chunks(keys):
        found.extend(conn.execute(stmt, {"b_keys": list(chunk)}))
    return found

"""Queries on the object table of a backend catalog kept in tssd's database.

The simulated and the SCSI library keep their catalogs in tables of the same shape
(``sim_objects``, ``scsi_objects``); :class:`ObjectTable` holds the queries they share,
for the model it is given. Database errors pass through: the backends turn them into
their own (:mod:`tssd.backends.records`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select

from tssd.db.engine import Sessions, reading
from tssd.db.plans import no_seqscan, sqlite_indexed

#: Bound parameters per IN list.
IN_CHUNK = 500


def chunks(items: Sequence[Any], size: int = IN_CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ObjectTable:
    """The object rows of one catalog model (``SimObject`` or ``ScsiObject``)."""

    def __init__(self, sessions: Sessions, model: Any) -> None:
        self.sessions = sessions
        self.model = model
        self._engine = sessions.kw["bind"]

    async def get(self, bfid: str) -> Any:
        """The object *bfid*, or None."""
        async with self.sessions() as session:
            return await session.get(self.model, bfid)

    async def with_bfids(self, bfids: Sequence[str]) -> list[Any]:
        """The objects among *bfids* that exist (rows with the model's attributes)."""
        return await reading(self._engine, _chunked, self.model, "bfid", bfids)

    async def of_pnfsids(self, pnfsids: Sequence[str]) -> list[Any]:
        """The copies of *pnfsids*, oldest first within each chunk of pnfsids (rows with
        the model's attributes)."""
        return await reading(self._engine, _chunked, self.model, "pnfsid", pnfsids)

    async def of_pnfsid_sized(self, pnfsid: str, size: int) -> list[Any]:
        """The copies of *pnfsid* that have *size* bytes."""
        async with self.sessions() as session:
            return list(
                await session.scalars(
                    select(self.model).where(self.model.pnfsid == pnfsid, self.model.size == size)
                )
            )

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

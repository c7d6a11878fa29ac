"""Request events and the prepared UPDATE of one request: shared by every state change
(:class:`~tssd.db.store.RequestStore` and the claims of :mod:`tssd.db.scheduling`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, Update, bindparam, insert, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tssd.db.models import Request, RequestEvent, utcnow
from tssd.domain import State

CHUNK = 500
REQUESTS = cast(Table, Request.__table__)
EVENTS = cast(Table, RequestEvent.__table__)
_EVENT_INSERT = insert(EVENTS)


@functools.lru_cache(maxsize=64)
def _single_transition(keys: tuple[str, ...], sources: int) -> Update:
    """The UPDATE of one request, built once per shape: finishing a file is the hot path,
    and constructing SQLAlchemy expressions costs more than running them."""
    states: list[Any] = [bindparam(f"s_{i}") for i in range(sources)]
    return (
        update(REQUESTS)
        .where(REQUESTS.c.id == bindparam("rid"), REQUESTS.c.state.in_(states))
        .values({k: bindparam(f"v_{k}") for k in keys})
        .returning(REQUESTS.c.id, REQUESTS.c.kind, REQUESTS.c.queue)
    )


async def _record_events(
    session: AsyncSession,
    ids: Sequence[int],
    from_state: State | None,
    to_state: State,
    reason: str | None,
) -> None:
    await _insert_events(await session.connection(), ids, from_state, to_state, reason)


async def _insert_events(
    conn: AsyncConnection,
    ids: Sequence[int],
    from_state: State | None,
    to_state: State,
    reason: str | None,
) -> None:
    for rows in _event_rows(ids, from_state, to_state, reason):
        await conn.execute(_EVENT_INSERT, rows)


def insert_events(
    conn: Connection,
    ids: Sequence[int],
    from_state: State | None,
    to_state: State,
    reason: str | None,
) -> None:
    """:func:`_insert_events` on a synchronous connection (``db.engine.in_transaction``)."""
    for rows in _event_rows(ids, from_state, to_state, reason):
        conn.execute(_EVENT_INSERT, rows)


def _event_rows(
    ids: Sequence[int], from_state: State | None, to_state: State, reason: str | None
) -> Iterator[dict[str, Any] | list[dict[str, Any]]]:
    """The parameters of the INSERTs: one row alone, else chunks (executemany)."""
    if not ids:
        return
    at = utcnow()
    source = from_state.value if from_state else None
    rows = [
        {"request_id": i, "at": at, "from_state": source, "to_state": to_state.value,
         "reason": reason}
        for i in ids
    ]  # fmt: skip
    if len(rows) == 1:
        yield rows[0]
        return
    for i in range(0, len(rows), CHUNK):
        yield rows[i : i + CHUNK]

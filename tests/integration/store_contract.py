"""Shared by the store contract suites: the stores under test, set-up and inspection.

``open_store`` gives a fresh store of each implementation (SQLite, PostgreSQL, memory);
the helpers do through each implementation's own means what the interface does not
(reading a request's history, configuring a queue).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import insert, select

from tssd.db.engine import create_engine, session_factory
from tssd.db.interface import RequestStoreInterface
from tssd.db.memory import MemoryStore
from tssd.db.models import Base, QueueRow, RequestEvent
from tssd.db.store import RequestStore
from tssd.domain import State
from tssd.submit import SubmitSpec, parse_submit

OPEN = ("queued", "active")
#: The parameters of a ``store`` fixture: every implementation of the interface.
STORES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("memory", id="memory"),
]


@asynccontextmanager
async def open_store(request: pytest.FixtureRequest) -> AsyncIterator[RequestStoreInterface]:
    """A fresh, empty store of the implementation ``request.param`` names."""
    if request.param == "memory":
        yield MemoryStore()
        return
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield RequestStore(session_factory(engine), postgres=request.param == "postgres")
    finally:
        await engine.dispose()


async def history(store: RequestStoreInterface, request_id: int) -> list[tuple[Any, ...]]:
    """(from_state, to_state, reason) of each event of *request_id*, oldest first."""
    if isinstance(store, MemoryStore):
        return [(e.from_state, e.to_state, e.reason) for e in store.events(request_id)]
    assert isinstance(store, RequestStore)
    stmt = (
        select(RequestEvent.from_state, RequestEvent.to_state, RequestEvent.reason)
        .where(RequestEvent.request_id == request_id)
        .order_by(RequestEvent.id)
    )
    async with store.sessions() as session:
        return [tuple(row) for row in (await session.execute(stmt)).all()]


async def set_queue(store: RequestStoreInterface, name: str, **values: Any) -> None:
    if isinstance(store, MemoryStore):
        store.set_queue(name, **values)
        return
    assert isinstance(store, RequestStore)
    async with store.sessions.begin() as session:
        await session.execute(insert(QueueRow).values(name=name, **values))


def recall(pnfsid: str = "00AA", path: str | None = None, **extra: Any) -> SubmitSpec:
    body = {"kind": "recall", "pnfsid": pnfsid, "path": path or f"/pool/{pnfsid}", **extra}
    return parse_submit(body)


def migrate(pnfsid: str = "00BB", **extra: Any) -> SubmitSpec:
    body = {"kind": "migrate", "pnfsid": pnfsid, "path": f"/pool/{pnfsid}", "size": 10,
            "storage_class": "atlas:raw", "checksum": "0000abcd", **extra}  # fmt: skip
    return parse_submit(body)


async def submit(store: RequestStoreInterface, *specs: SubmitSpec) -> list[int]:
    return [row.id for _, row in await store.submit(specs)]


async def activate(
    store: RequestStoreInterface,
    ids: Sequence[int],
    *,
    instance: str | None = None,
    drive: str | None = None,
) -> None:
    """Claim the queued *ids* as *instance*'s *drive* would (the lifecycle's ``claim``)."""
    saved, store.instance = store.instance, instance
    try:
        claimed = await store.scheduling.claim_ids(ids, drive)
    finally:
        store.instance = saved
    assert sorted(r.id for r in claimed) == sorted(ids)


async def end(
    store: RequestStoreInterface, ids: Sequence[int], state: State, **values: Any
) -> None:
    """Bring the queued *ids* to *state* through the named transitions, as the daemon
    would: cancelled; or claimed, then finished (done, abandoned) or failed with *values*."""
    if state is State.CANCELLED:
        assert sorted(await store.cancel(ids, "test")) == sorted(ids)
        return
    await activate(store, ids)
    for request_id in ids:
        ending = store.fail if state is State.FAILED else store.finish
        assert await ending(request_id, "test", **values)
    if state is State.ABANDONED:
        assert sorted(await store.abandon(ids, "test", error="test")) == sorted(ids)


async def state_of(store: RequestStoreInterface, request_id: int) -> str:
    return (await store.get(request_id)).state

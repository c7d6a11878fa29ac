"""Retention (database.retention_days): finished requests older than N days leave the
database with their events, in batches; open and recent ones stay. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.config import DatabaseSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Request, RequestEvent, utcnow
from tssd.db.retention import SqlRetention, purge, retention
from tssd.db.schema import ensure_schema


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_engine(db_url)
    await ensure_schema(engine, auto_init=True)
    try:
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def _fill(sessions: async_sessionmaker[Any]) -> dict[str, list[int]]:
    """Old and recent finished requests of each terminal state, and open old ones."""
    now = utcnow()
    old, recent = now - timedelta(days=31), now - timedelta(days=29)
    groups: dict[str, list[Request]] = {"old": [], "recent": [], "open": []}
    n = 0
    for state in ("done", "failed", "cancelled"):
        for group, finished in (("old", old), ("recent", recent)):
            for _ in range(7):
                n += 1
                groups[group].append(Request(
                    kind="recall", state=state, key=f"K{n}", pnfsid=f"{n:X}", queue="q",
                    created_at=finished - timedelta(hours=1), finished_at=finished,
                ))  # fmt: skip
    for state in ("queued", "active"):
        for _ in range(5):
            n += 1
            # Open since long ago; one even carries a finish time from before a retry.
            groups["open"].append(Request(
                kind="recall", state=state, key=f"K{n}", pnfsid=f"{n:X}", queue="q",
                created_at=old, finished_at=old if state == "queued" else None,
            ))  # fmt: skip
    async with sessions.begin() as s:
        s.add_all([r for rows in groups.values() for r in rows])
        await s.flush()
        for rows in groups.values():
            for r in rows:
                s.add_all([RequestEvent(request_id=r.id, to_state="queued"),
                           RequestEvent(request_id=r.id, to_state=r.state)])  # fmt: skip
    return {g: [r.id for r in rows] for g, rows in groups.items()}


async def _left(sessions: async_sessionmaker[Any]) -> tuple[set[int], set[int]]:
    async with sessions() as s:
        requests = set((await s.scalars(select(Request.id))).all())
        events = set((await s.scalars(select(RequestEvent.request_id))).all())
    return requests, events


async def test_old_finished_requests_go_with_their_events(
    sessions: async_sessionmaker[Any],
) -> None:
    ids = await _fill(sessions)
    batches: list[int] = []
    deleted = await purge(
        SqlRetention(sessions), utcnow() - timedelta(days=30), batch=4, counted=batches.append
    )
    assert deleted == len(ids["old"]) == 21
    assert sum(batches) == 21 and max(batches) <= 4  # in batches, each counted
    requests, events = await _left(sessions)
    assert requests == set(ids["recent"]) | set(ids["open"])
    assert events == requests  # no orphaned events, none of the kept lost
    async with sessions() as s:
        assert await s.scalar(select(func.count()).select_from(RequestEvent)) == 2 * len(requests)
    assert await purge(SqlRetention(sessions), utcnow() - timedelta(days=30)) == 0


async def test_the_background_round_purges_and_zero_days_keeps_everything(
    sessions: async_sessionmaker[Any],
) -> None:
    ids = await _fill(sessions)
    assert DatabaseSettings().retention_days == 30.0
    async with retention(SqlRetention(sessions), 0, batch=10, every_s=0.01):
        pass
    assert len((await _left(sessions))[0]) == sum(len(v) for v in ids.values())
    counted: list[int] = []
    async with retention(
        SqlRetention(sessions), 30, batch=10, every_s=3600, counted=counted.append
    ):
        for _ in range(200):
            if sum(counted) >= 21:
                break
            await asyncio.sleep(0.05)
    assert sum(counted) == 21
    requests, _ = await _left(sessions)
    assert requests == set(ids["recent"]) | set(ids["open"])

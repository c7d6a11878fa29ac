"""Retention: finished requests leave the database some days after they finished.

The hot tables then hold the open requests and a bounded history (``database.
retention_days``, default 30). Deletion goes in batches of ``retention_batch`` requests,
one short transaction each, oldest finished first, so the API and the scheduler never
wait behind one long delete; a request's events go in the same transaction as the
request. Open requests are never touched: the state is checked in the DELETE itself, so
a request retried meanwhile stays.

:class:`SqlRetention` is the batch in SQL; :func:`purge` and :func:`retention` drive any
:class:`tssd.ports.history.Retention` (``tssd/db/memory_history.py`` has the memory one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import cast

import structlog
from sqlalchemy import Table, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from tssd.background import running
from tssd.db.engine import Sessions
from tssd.db.models import TERMINAL_STATES, Request, RequestEvent, utcnow
from tssd.db.plans import NO_SEQSCAN
from tssd.ports.history import Purged, Retention

log = structlog.get_logger()
REQUESTS = cast(Table, Request.__table__)
EVENTS = cast(Table, RequestEvent.__table__)


class SqlRetention:
    """:class:`tssd.ports.history.Retention` in SQL: one transaction per batch."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def purge_batch(self, before: datetime, batch: int) -> Purged:
        # Served by ix_requests_finished_at: the state is compared through coalesce() so
        # that SQLite does not take a state index instead and sort every finished request.
        finished = func.coalesce(REQUESTS.c.state, "").in_(TERMINAL_STATES)
        oldest = (
            select(REQUESTS.c.id)
            .where(REQUESTS.c.finished_at < before, finished)
            .order_by(REQUESTS.c.finished_at)
            .limit(batch)
        )
        async with self.sessions.begin() as session:
            if session.get_bind().dialect.name == "postgresql":
                # request_id has no unique index: without statistics a batch of 5,000
                # looked like the whole table to PostgreSQL (tssd.db.plans).
                await session.execute(NO_SEQSCAN)
            ids = list((await session.scalars(oldest)).all())
            if not ids:
                return Purged(0, 0)
            gone = delete(REQUESTS).where(REQUESTS.c.id.in_(ids), finished).returning(REQUESTS.c.id)
            deleted = list((await session.scalars(gone)).all())
            if deleted:
                # Explicit rather than ON DELETE CASCADE: SQLite enforces foreign keys
                # only when asked to, per connection.
                await session.execute(delete(EVENTS).where(EVENTS.c.request_id.in_(deleted)))
        return Purged(len(ids), len(deleted))


async def purge(
    purger: Retention,
    before: datetime,
    *,
    batch: int = 5000,
    counted: Callable[[int], None] | None = None,
) -> int:
    """Delete requests finished before *before*, with their events, batch after batch;
    return how many. *counted* is told each batch's number."""
    total = 0
    while True:
        done = await purger.purge_batch(before, batch)
        if not done.chosen:
            return total
        total += done.deleted
        if counted is not None:
            counted(done.deleted)
        if done.chosen < batch:
            return total
        await asyncio.sleep(0)  # let the API and the scheduler in between batches


@asynccontextmanager
async def retention(
    purger: Retention,
    days: float,
    *,
    batch: int,
    every_s: float,
    counted: Callable[[int], None] | None = None,
) -> AsyncIterator[None]:
    """Purge every *every_s* seconds for the duration of the ``async with`` block."""
    if days <= 0:
        yield
        return

    async def loop() -> None:
        while True:
            try:
                before = utcnow() - timedelta(days=days)
                n = await purge(purger, before, batch=batch, counted=counted)
                if n:
                    log.info("retention.deleted", requests=n, before=before.isoformat())
            except SQLAlchemyError as exc:  # the next round tries again
                log.warning("retention.failed", error=str(exc)[:200])
            await asyncio.sleep(every_s)

    async with running(loop(), "retention"):
        yield

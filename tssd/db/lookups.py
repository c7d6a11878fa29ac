"""Reads of requests by the components around the scheduler (ENDIT, delivery, simulate).

Each is one read in a session of its own; requests come back as
:class:`tssd.domain.Request` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select

from tssd import domain
from tssd.db.engine import Sessions
from tssd.db.models import OPEN_STATES, Kind, Request, RequestEvent, State
from tssd.db.views import request_records

#: Bound parameters per IN list (the store's own chunk).
CHUNK = 500


async def requests_by_id(sessions: Sessions, ids: Sequence[int]) -> list[domain.Request]:
    """The current records of *ids* (those that exist)."""
    found: list[domain.Request] = []
    async with sessions() as session:
        for i in range(0, len(ids), CHUNK):
            stmt = select(Request).where(Request.id.in_(ids[i : i + CHUNK]))
            found.extend(request_records((await session.scalars(stmt)).all()))
    return found


async def open_transfers_under(
    sessions: Sessions, base: str, ids: Sequence[int] | None = None
) -> list[domain.Request]:
    """Open recalls and migrations whose path lies below the directory *base* (of *ids*
    only, when given)."""
    stmt = select(Request).where(
        Request.state.in_(OPEN_STATES),
        Request.kind.in_((Kind.RECALL.value, Kind.MIGRATE.value)),
        Request.path.startswith(base, autoescape=True),
    )
    async with sessions() as session:
        if ids is None:
            return request_records((await session.scalars(stmt)).all())
        found: list[domain.Request] = []
        for i in range(0, len(ids), CHUNK):
            chunk = stmt.where(Request.id.in_(ids[i : i + CHUNK]))
            found += request_records((await session.scalars(chunk)).all())
        return found


async def last_event_id(sessions: Sessions) -> int:
    """The highest request event id so far (0 when there is none)."""
    async with sessions() as session:
        return await session.scalar(select(func.max(RequestEvent.id))) or 0


async def events_after(sessions: Sessions, after: int) -> list[tuple[int, int, str]]:
    """(id, request id, new state) of the request events after event *after*."""
    stmt = select(RequestEvent.id, RequestEvent.request_id, RequestEvent.to_state).where(
        RequestEvent.id > after
    )
    async with sessions() as session:
        return [(e.id, e.request_id, e.to_state) for e in (await session.execute(stmt)).all()]


async def unclaimed_recalls(
    sessions: Sessions, delivery: str, before: datetime, limit: int
) -> list[tuple[int, str | None, str | None, str]]:
    """(id, path, pnfsid, queue) of recalls done before *before* whose file still waits,
    as *delivery*, for a pool call to claim it."""
    # delivery = 'claim' lasts until a call claims (then 'claimed'): an index range.
    stmt = (
        select(Request.id, Request.path, Request.pnfsid, Request.queue)
        .where(
            Request.delivery == delivery,
            Request.state == State.DONE.value,
            Request.finished_at < before,
            Request.kind == Kind.RECALL.value,
        )
        .limit(limit)
    )
    async with sessions() as session:
        return [(i, path, pnfsid, queue) for i, path, pnfsid, queue in await session.execute(stmt)]


async def all_recalls(sessions: Sessions) -> list[domain.Request]:
    """Every recall request (a simulation's outcome)."""
    async with sessions() as session:
        stmt = select(Request).where(Request.kind == Kind.RECALL)
        return request_records((await session.scalars(stmt)).all())

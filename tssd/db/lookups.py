"""The request history in SQL: :class:`tssd.ports.history.RequestHistory` on the
``requests`` and ``request_events`` tables.

Each read runs in a session of its own; requests come back as
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
from tssd.ports.history import StateEvent, Unclaimed

#: Bound parameters per IN list (the store's own chunk).
CHUNK = 500


class SqlHistory:
    """Reads of requests and request events (the port's docstrings state each)."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def requests_by_id(self, ids: Sequence[int]) -> list[domain.Request]:
        found: list[domain.Request] = []
        async with self.sessions() as session:
            for i in range(0, len(ids), CHUNK):
                stmt = select(Request).where(Request.id.in_(ids[i : i + CHUNK]))
                found.extend(request_records((await session.scalars(stmt)).all()))
        return found

    async def open_transfers_under(
        self, base: str, ids: Sequence[int] | None = None
    ) -> list[domain.Request]:
        stmt = select(Request).where(
            Request.state.in_(OPEN_STATES),
            Request.kind.in_((Kind.RECALL.value, Kind.MIGRATE.value)),
            Request.path.startswith(base, autoescape=True),
        )
        async with self.sessions() as session:
            if ids is None:
                return request_records((await session.scalars(stmt)).all())
            found: list[domain.Request] = []
            for i in range(0, len(ids), CHUNK):
                chunk = stmt.where(Request.id.in_(ids[i : i + CHUNK]))
                found += request_records((await session.scalars(chunk)).all())
            return found

    async def last_event_id(self) -> int:
        async with self.sessions() as session:
            return await session.scalar(select(func.max(RequestEvent.id))) or 0

    async def events_after(self, after: int) -> list[StateEvent]:
        stmt = select(RequestEvent.id, RequestEvent.request_id, RequestEvent.to_state).where(
            RequestEvent.id > after
        )
        async with self.sessions() as session:
            rows = (await session.execute(stmt)).all()
        return [StateEvent(e.id, e.request_id, e.to_state) for e in rows]

    async def unclaimed_recalls(
        self, delivery: str, before: datetime, limit: int
    ) -> list[Unclaimed]:
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
        async with self.sessions() as session:
            rows = await session.execute(stmt)
            return [Unclaimed(i, path, pnfsid, queue) for i, path, pnfsid, queue in rows]

    async def all_recalls(self) -> list[domain.Request]:
        async with self.sessions() as session:
            stmt = select(Request).where(Request.kind == Kind.RECALL)
            return request_records((await session.scalars(stmt)).all())

"""The scheduler's queries: which requests wait for a tape, and claiming them for a drive.

A claim moves queued requests to active in one transaction (``FOR UPDATE SKIP LOCKED``
on PostgreSQL, so several daemons sharing the database never claim one request twice).
Requests that must wait are left out by the same conditions everywhere: not of a queue an
operator *paused*, not a recall into a file system that is nearly full (*held*: path
prefixes, see :mod:`tssd.backpressure`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, Select, func, not_, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from tssd import domain
from tssd.db import claims
from tssd.db.engine import db_retry, in_transaction, reading
from tssd.db.events import insert_events
from tssd.db.models import Request, utcnow
from tssd.db.polls import PollIndex
from tssd.db.views import request_records
from tssd.domain import Kind, State
from tssd.lifecycle import LIFECYCLE, Transition, target
from tssd.ports.scheduling import PendingRow

#: Every queued, located recall: the planner's full load reads the pending set by design
#: (at start-up and every ``resync_s``), the one statement that may read most of the table.
PENDING = select(
    Request.id, Request.volume, Request.position, Request.size, Request.priority,
    Request.queue, Request.created_at,
).where(
    Request.kind == Kind.RECALL, Request.state == State.QUEUED, Request.volume.is_not(None)
)  # fmt: skip


def unpaused(paused: frozenset[str]) -> tuple[ColumnElement[bool], ...]:
    """The clause that leaves the requests of *paused* queues where they are."""
    return (Request.queue.not_in(sorted(paused)),) if paused else ()


def outside(held: Sequence[str]) -> list[ColumnElement[bool]]:
    """The clauses leaving out recalls whose path starts with one of the *held* prefixes."""
    inside = [Request.path.startswith(prefix, autoescape=True) for prefix in held]
    return [or_(Request.path.is_(None), not_(cond)) for cond in inside]


class Candidates:
    """Reads of the queue for the scheduler, each in a transaction of its own."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def recall_volumes(
        self, paused: frozenset[str], held: Sequence[str], *, first: int | None = None
    ) -> list[tuple[str | None, int | None, int]]:
        """(volume, priority, id) of queued, located recalls a session may claim.

        With *first*: the *first* such requests in arrival order, one row each; without:
        one row per volume with its highest priority and its oldest request.
        """
        stmt = claims.claimable_volumes(tuple(sorted(paused)), tuple(held), first is not None)
        engine = self.sessions.kw["bind"]
        return await reading(engine, _rows, stmt, {"b_n": first})

    async def unlocated(self, limit: int) -> list[domain.Request]:
        """The oldest queued recalls with no tape copy chosen yet."""
        engine = self.sessions.kw["bind"]
        return await reading(engine, _requests, claims.UNLOCATED, {"b_n": limit})

    async def volumes_with_recalls(self, candidates: Sequence[str]) -> set[str]:
        """Those of *candidates* with recalls queued or active."""
        needed: set[str] = set()
        async with self.sessions() as session:
            for i in range(0, len(candidates), 500):
                stmt = (
                    select(Request.volume)
                    .where(
                        Request.state.in_(("queued", "active")),
                        Request.kind == Kind.RECALL,
                        Request.volume.in_(candidates[i : i + 500]),
                    )
                    .distinct()
                )
                needed.update(v for v in (await session.scalars(stmt)).all() if v)
        return needed

    async def unwritten_migrations(
        self, paused: frozenset[str], limit: int
    ) -> list[domain.Request]:
        """Queued migrations with a checksum, never attempted, outside *paused* queues: the
        ones whose file may be on tape already."""
        stmt = (
            select(Request)
            .where(
                Request.kind == Kind.MIGRATE,
                Request.state == State.QUEUED,
                Request.checksum.is_not(None),
                Request.attempts == 0,
                *unpaused(paused),
            )
            .order_by(Request.id)
            .limit(limit)
        )
        async with self.sessions() as session:
            return request_records((await session.scalars(stmt)).all())

    async def migration_groups(
        self, paused: frozenset[str]
    ) -> list[tuple[str | None, int, int | None, datetime | None]]:
        """(storage class, files, bytes, oldest created_at) of queued migrations outside
        the *paused* queues."""
        stmt = (
            select(
                Request.storage_class,
                func.count(),
                func.sum(Request.size),
                func.min(Request.created_at),
            )
            .where(Request.kind == Kind.MIGRATE, Request.state == State.QUEUED, *unpaused(paused))
            .group_by(Request.storage_class)
        )
        async with self.sessions() as session:
            return [tuple(row) for row in (await session.execute(stmt)).all()]  # type: ignore[misc]

    async def pending_recalls(self) -> AsyncIterator[PendingRow]:
        """Every queued, located recall (:data:`PENDING`), streamed in one read."""
        async with self.sessions() as session:
            # On the session's connection, not through the ORM: its row handling cost three
            # times the CPU of the load itself (16 s for a million recalls; issue 22).
            conn = await session.connection()
            # A part per loop turn: parts of 10,000 rows held the loop 30-60 ms each while
            # the background resync ran, and a drive freed meanwhile waited (issue 22).
            result = await conn.stream(PENDING.execution_options(yield_per=1_000))
            async for part in result.partitions():
                for row in part:
                    yield tuple(row)  # type: ignore[misc]


class ClaimingStore(Protocol):
    """What a claim needs of the request store (``RequestStore`` has it): the store
    depends on this module, not this module on the store."""

    @property
    def sessions(self) -> async_sessionmaker[AsyncSession]: ...

    @property
    def engine(self) -> AsyncEngine: ...

    @property
    def postgres(self) -> bool: ...

    @property
    def instance(self) -> str | None: ...

    @property
    def polls(self) -> PollIndex: ...


class Scheduling(Candidates):
    """The scheduler's queries and claims. A claim moves the requests it selects from
    queued to active, owned by *drive*, and returns them (their rows, now active)."""

    def __init__(self, store: ClaimingStore) -> None:
        super().__init__(store.sessions)
        self.store = store

    async def claim_recalls(
        self,
        volume: str,
        drive: str,
        limit: int,
        *,
        queues: frozenset[str] | None = None,
        paused: frozenset[str] = frozenset(),
        held: Sequence[str] = (),
        min_priority: int | None = None,
        after: int | None = None,
        by_position: bool = True,
    ) -> list[domain.Request]:
        """Claim up to *limit* queued recalls of *volume* (of *queues*, when given), of
        priority >= *min_priority* and position > *after* when given, in position (else
        arrival) order."""
        stmt = claims.recall_claim(
            None if queues is None else tuple(sorted(queues)), tuple(sorted(paused)),
            tuple(held), min_priority is not None, after is not None, by_position,
            self.store.postgres,
        )  # fmt: skip
        params = {
            "b_volume": volume,
            "b_n": limit,
            "b_min_priority": min_priority,
            "b_after": after,
        }
        order = claims.BY_POSITION if by_position else claims.BY_ARRIVAL
        return await self._claim(stmt, params, order, drive)

    async def claim_migrations(
        self, storage_class: str, drive: str, limit: int, *, paused: frozenset[str] = frozenset()
    ) -> list[domain.Request]:
        """Claim up to *limit* queued migrations of *storage_class*, highest priority first."""
        stmt = claims.migration_claim(tuple(sorted(paused)), self.store.postgres)
        params = {"b_storage_class": storage_class, "b_n": limit}
        return await self._claim(stmt, params, claims.BY_PRIORITY, drive)

    async def claim_removals(self, limit: int) -> list[domain.Request]:
        """Claim up to *limit* queued removals, oldest first (no drive: catalog work)."""
        stmt = claims.removal_claim(self.store.postgres)
        return await self._claim(stmt, {"b_n": limit}, claims.BY_ARRIVAL, None)

    async def claim_ids(self, ids: Iterable[int], drive: str | None = None) -> list[domain.Request]:
        """Claim the requests *ids* that are still queued."""
        # The state in the subquery too: a request cancelled or claimed by another is
        # neither returned as claimed nor given a queued -> active event it never made.
        wanted = list(ids)
        if not wanted:
            return []
        stmt = claims.ids_claim(self.store.postgres)
        return await self._claim(stmt, {"b_ids": wanted}, claims.BY_ARRIVAL, drive)

    @db_retry
    async def _claim(
        self, stmt: claims.Claim, params: dict[str, Any], order: str, drive: str | None
    ) -> list[domain.Request]:
        """Atomically move the queued requests *stmt* selects to active: its statements
        and the events in one transaction, run in one greenlet."""
        store = self.store
        bound = {**params, "b_drive": drive, "b_now": utcnow(), "b_instance": store.instance}
        rows = await in_transaction(store.engine, _claim, stmt, bound, order, drive)
        store.polls.moved([r.id for r in rows], target(Transition.CLAIM))
        return rows


def _claim(
    conn: Connection, stmt: claims.Claim, bound: dict[str, Any], order: str, drive: str | None
) -> list[domain.Request]:
    if stmt.choose is not None:
        ids = list(conn.execute(stmt.choose, bound).scalars())
        if not ids:
            return []
        bound = {**bound, "b_ids": ids}
    rows = claims.in_order(claims.as_requests(conn.execute(stmt.update, bound)), order)
    [queued] = LIFECYCLE[Transition.CLAIM].sources
    insert_events(conn, [r.id for r in rows], queued, target(Transition.CLAIM), drive)
    return rows


def _rows(conn: Connection, stmt: Select[Any], bound: dict[str, Any]) -> list[Any]:
    return [tuple(row) for row in conn.execute(stmt, bound)]


def _requests(conn: Connection, stmt: Select[Any], bound: dict[str, Any]) -> list[domain.Request]:
    return claims.as_requests(conn.execute(stmt, bound))

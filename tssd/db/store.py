"""The request store: every state change of a request goes through here.

Transitions are conditional updates (``WHERE state = ...``), so a request finished,
cancelled or claimed elsewhere is never overwritten, and several daemons can share one
PostgreSQL database: claims (``store.scheduling``, :mod:`tssd.db.scheduling`) use
``FOR UPDATE SKIP LOCKED`` there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import structlog
from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    create_engine,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from tssd.db.actions import OperatorActions
from tssd.db.counts import Counts, count_open
from tssd.db.engine import db_retry, in_transaction
from tssd.db.events import (
    CHUNK,
    REQUESTS,
    _record_events,
    _single_transition,
    insert_events,
)
from tssd.db.models import Request as RequestRow
from tssd.db.models import utcnow
from tssd.db.notifier import COUNTED, Notifier, Outcomes
from tssd.db.pages import ListFilter, page_statement
from tssd.db.plans import unindexed
from tssd.db.polls import (
    LATEST,
    REPORTED,
    Obtained,
    PollIndex,
    adoptable,
    copy_removed,
    obtain,
    on_tape_already,
)
from tssd.db.queues import QueueStore, _queue_rows
from tssd.db.scheduling import Scheduling
from tssd.db.statistics import Upkeep
from tssd.db.submits import SqliteWriter, record, sqlite_file
from tssd.db.views import request_record, request_records
from tssd.domain import Kind, Request, State
from tssd.errors import Conflict, NotFound
from tssd.lifecycle import Transition, sources, target
from tssd.submit import SubmitSpec
from tssd.work import WorkSignal

log = structlog.get_logger()
__all__ = ["CHUNK", "ListFilter", "RequestStore"]


class RequestStore(OperatorActions):
    """Every change of a request's state, and the reads that must agree with them.

    Each method is one transaction; a transition happens only from the states the
    lifecycle (tssd.lifecycle) names for it, so concurrent sessions, cancels and other
    instances never overwrite each other. Every change keeps the *notifier* (wake-ups)
    and the poll index (tss-hsm's reads) current.
    *instance* is this daemon's id when several share the database (tssd.cluster).
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        postgres: bool,
        notifier: Notifier | None = None,
        work: WorkSignal | None = None,
        poll_ttl_s: float = 600.0,
        instance: str | None = None,
        outcomes: Outcomes | None = None,
        statistics: Upkeep | None = None,
    ) -> None:
        self.sessions = sessions
        #: Told of every request this store ends (the requests-total counter).
        self.outcomes = outcomes
        self.engine: AsyncEngine = sessions.kw["bind"]
        self.postgres = postgres
        self.notifier = notifier if notifier is not None else Notifier()
        #: The scheduler's work signal, woken by new and requeued work.
        self.work = work if work is not None else WorkSignal()
        #: Open recalls and migrations for tss-hsm's polls; kept current by every change here.
        self.polls = PollIndex(ttl_s=poll_ttl_s)
        self._reader: Engine | None = None
        self._writer: SqliteWriter | None = None
        #: This daemon's id when several share the database (tssd.cluster), else None.
        self.instance = instance
        #: Counts per kind, queue and state, bounded in cost at any size (tssd.db.counts).
        self.tally = Counts(sessions)
        #: ANALYZE of what the store grows or shrinks (tssd.db.statistics); off by default.
        self.statistics = statistics if statistics is not None else Upkeep(self.engine, 0)

    @functools.cached_property
    def scheduling(self) -> Scheduling:
        """The scheduler's queue reads and claims (:mod:`tssd.db.scheduling`)."""
        return Scheduling(self)

    @functools.cached_property
    def queue_settings(self) -> QueueStore:
        """The configured queues' rows (:mod:`tssd.db.queues`)."""
        return QueueStore(self.sessions)

    # -- intake -----------------------------------------------------------------------

    async def submit(self, specs: Sequence[SubmitSpec]) -> list[tuple[bool, Request]]:
        """Record *specs* in one transaction; attach to open requests of the same key."""
        for attempt in range(3):
            try:
                results = [
                    (new, request_record(row)) for new, row in await self._submit_once(specs)
                ]
            except IntegrityError:
                # Another submitter inserted the same key between our read and insert.
                if attempt == 2:
                    raise
                continue
            # One request is a client that will poll it; a batch (bulk API, ENDIT) is not
            # held in the poll index unless polled (see PollIndex.seen).
            self.polls.seen((row for _, row in results), add=len(specs) == 1)
            fresh = {Kind(row.kind) for created, row in results if created}
            if fresh:
                created = sum(1 for new, _ in results if new)
                self.statistics.changed(created, "requests", "request_events")
                self.work.submitted(fresh)
            return results
        raise AssertionError("unreachable")

    async def obtain(self, spec: SubmitSpec, *, adopt_finished: bool) -> Obtained:
        """tss-hsm's adopt-or-create in one transaction (:func:`tssd.db.polls.obtain`)."""
        # Collecting a finished request is a read: on SQLite the reader of latest() never
        # queues behind the scheduler's write transactions, as a write transaction would.
        latest = await self.latest(spec.kind.value, spec.key)
        if latest is not None and adoptable(*latest, spec.path, adopt_finished=adopt_finished):
            self.polls.seen([latest[0]])
            return Obtained(False, latest[0], latest[1])
        if latest is not None and await self._on_tape_already(latest[0], spec):
            return Obtained(False, latest[0], latest[1])
        for attempt in range(3):
            try:
                found = await obtain(self.engine, spec, adopt_finished=adopt_finished)
            except IntegrityError:
                # A concurrent submit created the open request: the next attempt adopts it.
                if attempt == 2:
                    raise
                continue
            self.polls.seen([found.row])
            if found.created:
                self.work.submitted((spec.kind,))
            return found
        raise AssertionError("unreachable")

    async def _on_tape_already(self, row: Request, spec: SubmitSpec) -> bool:
        return (
            on_tape_already(row, spec)
            and row.bfid is not None
            and not await copy_removed(self.engine, row.bfid)
        )

    async def _submit_once(self, specs: Sequence[SubmitSpec]) -> list[tuple[bool, Any]]:
        # Core SQL, off the event loop on a SQLite file (tssd.db.submits).
        if sqlite_file(self.engine.url):
            if self._writer is None:
                self._writer = SqliteWriter(self.engine.url)
            return await self._writer.run(record, specs)
        async with self.engine.begin() as conn:
            return await conn.run_sync(record, specs)

    # -- queries ----------------------------------------------------------------------

    async def get(self, request_id: int) -> Request:
        async with self.sessions() as session:
            row = await session.get(RequestRow, request_id)
        if row is None:
            raise NotFound(f"no request {request_id}")
        return request_record(row)

    async def list_requests(self, flt: ListFilter) -> list[Request]:
        async with self.sessions() as session:
            return request_records((await session.scalars(page_statement(flt))).all())

    async def query(self, ids: Sequence[int]) -> dict[str, Any]:
        """Progress of a batch of requests."""
        counts = {s.value: 0 for s in State}
        total = done = 0
        seen: set[int] = set()
        failed: list[Request] = []
        async with self.sessions() as session:
            for i in range(0, len(ids), CHUNK):
                stmt = select(RequestRow).where(RequestRow.id.in_(ids[i : i + CHUNK]))
                for row in (await session.scalars(stmt)).all():
                    seen.add(row.id)
                    counts[row.state] += 1
                    total += row.size or 0
                    done += (row.size or 0) if row.state == State.DONE else 0
                    if row.state in (State.FAILED, State.CANCELLED) and len(failed) < 100:
                        failed.append(request_record(row))
        missing = [i for i in ids if i not in seen]
        return {
            "counts": counts,
            "bytes_total": total,
            "bytes_done": done,
            "missing": missing,
            "failed": failed,
        }

    async def counts(self) -> list[tuple[str, str, str, int]]:
        """(kind, queue, state, count) for every combination present (see tssd.db.counts:
        exact on a small table, at most ``max_age_s`` old on a large one)."""
        return [(g.kind, g.queue, g.state, g.count) for g in await self.tally.get()]

    async def queues(self) -> list[dict[str, Any]]:
        """The configured queues (priority, drive limit, paused)."""
        return await _queue_rows(self.sessions)

    async def count_open(self) -> int:
        """Open requests counted now, from the state index (:func:`tssd.db.counts.count_open`)."""
        return await count_open(self.engine)

    # wait: tssd.db.actions.OperatorActions

    async def latest(self, kind: str, pnfsid: str) -> tuple[Request, bool] | None:
        """The newest request of *kind* for *pnfsid*, and whether its outcome was reported.

        ``tss-hsm`` polls with this: a poll must find the recall it started even after that
        recall has finished, and must not report one outcome to two dCache calls. It is the
        hottest query of poll mode (every pending stage, every ``p:delay``). On SQLite it is
        one indexed read on a synchronous connection: through aiosqlite, the pool's ping,
        the thread hops and the rollback cost ten times the read (docs/benchmarks.md), and
        a WAL reader never waits for the writer.
        """
        params = {"pnfsid": pnfsid, "kind": kind}
        if self.postgres:
            async with self.sessions.kw["bind"].connect() as conn:
                row = (await conn.execute(LATEST, params)).first()
        else:
            with self._sqlite_reader().connect() as sync_conn:
                row = sync_conn.execute(LATEST, params).first()
        if row is None:
            return None
        return request_record(row), bool(row.reported_)

    def _sqlite_reader(self) -> Engine:
        if self._reader is None:
            url = self.sessions.kw["bind"].url.set(drivername="sqlite")
            self._reader = create_engine(url, connect_args={"timeout": 5.0})
        return self._reader

    async def mark_reported(self, request_id: int) -> Request:
        """Record that a client was told the outcome of a finished request (idempotent)."""
        async with self.sessions.begin() as session:
            row = await session.get(RequestRow, request_id)
            if row is None:
                raise NotFound(f"no request {request_id}")
            state = State(row.state)
            if state.is_open:
                raise Conflict(f"request {request_id} is {row.state}: not finished")
            if row.delivery == "claim":
                # Its part file was claimed: off the reaper's index (tssd.delivery).
                row.delivery = "claimed"
            await _record_events(session, [row.id], state, state, REPORTED)
        return request_record(row)

    # cancel and retry: tssd.db.actions.OperatorActions

    # -- scheduler side ---------------------------------------------------------------

    @db_retry
    async def _apply(
        self,
        transition: Transition,
        ids: Sequence[int],
        *,
        reason: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> list[int]:
        """Move those of *ids* in *transition*'s from-states to its to-state (the table
        of tssd.lifecycle); return the ids that moved. The ledger's methods call this."""
        if not ids:
            return []
        to_state = target(transition)
        # Core statements on a bare connection, the transaction in one greenlet: an ORM
        # session and its bookkeeping cost more than the UPDATE itself, and this runs
        # once per file.
        params = {"state": to_state.value, "updated_at": utcnow(), **(values or {})}
        from_states = list(sources(transition))
        rows = await in_transaction(
            self.engine, _transition, list(ids), from_states, params, to_state, reason
        )
        moved = [r[0] for r in rows]
        if rows and self.outcomes is not None and to_state in COUNTED:
            self.outcomes(to_state, [(kind, queue) for _, kind, queue in rows])
        self.polls.moved(moved, to_state)
        if not to_state.is_open:
            self.notifier.finished(moved)
        elif moved and to_state is State.QUEUED:
            # Requeued work of any kind: the next scheduling pass looks at everything.
            self.work.requeued()
        return moved

    @db_retry
    async def requeue_active(self, reason: str) -> int:
        """At start-up: requests left active by a previous run go back to the queue.

        With several instances on one database only this instance's own (or unowned)
        ones: the others' belong to live daemons, or to the reaper (tssd.cluster).
        """
        stmt = select(RequestRow.id).where(RequestRow.state == State.ACTIVE)
        if self.instance is not None:
            mine = (RequestRow.instance == self.instance) | RequestRow.instance.is_(None)
            stmt = stmt.where(mine)
        async with self.sessions() as session:
            ids = list((await session.scalars(stmt)).all())
        return len(await self.restart(ids, reason))

    @db_retry
    async def set_locations(self, located: dict[int, tuple[str, int]]) -> None:
        if not located:
            return
        stmt = (
            update(REQUESTS)
            .where(REQUESTS.c.id == bindparam("rid"))
            .values(volume=bindparam("vol"), position=bindparam("pos"))
        )
        params = [{"rid": i, "vol": v, "pos": p} for i, (v, p) in located.items()]
        async with self.sessions.begin() as session:
            conn = await session.connection()
            for i in range(0, len(params), CHUNK):
                await conn.execute(stmt, params[i : i + CHUNK])


def _transition(
    conn: Connection,
    ids: list[int],
    sources: list[str],
    params: dict[str, Any],
    to_state: State,
    reason: str | None,
) -> list[tuple[int, str, str]]:
    """:meth:`RequestStore._apply` inside its transaction: (id, kind, queue) of each
    request that moved."""
    moved: list[tuple[int, str, str]] = []
    if len(ids) == 1:
        stmt = _single_transition(tuple(sorted(params)), len(sources))
        bound = {f"v_{k}": v for k, v in params.items()}
        bound.update({f"s_{i}": state for i, state in enumerate(sources)}, rid=ids[0])
        moved.extend((i, k, q) for i, k, q in conn.execute(stmt, bound))
    else:
        for i in range(0, len(ids), CHUNK):
            chunk = (
                update(REQUESTS)
                .where(
                    REQUESTS.c.id.in_(ids[i : i + CHUNK]),
                    unindexed(REQUESTS.c.state).in_(sources),
                )
                .values(**params)
                .returning(REQUESTS.c.id, REQUESTS.c.kind, REQUESTS.c.queue)
            )
            moved.extend((i, k, q) for i, k, q in conn.execute(chunk))
    insert_events(conn, [r[0] for r in moved], None, to_state, reason)
    return moved

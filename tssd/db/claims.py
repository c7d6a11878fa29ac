"""The claim statements in core SQL, each built once per shape and bound per call.

A claim moves the chosen queued requests to active and returns them, in one transaction:
on PostgreSQL one statement, ``WITH chosen AS MATERIALIZED (SELECT id ... ORDER BY ...
LIMIT :n FOR UPDATE SKIP LOCKED) UPDATE requests ... WHERE id IN (SELECT id FROM chosen)
RETURNING *`` (daemons sharing a database skip each other's rows); on SQLite the SELECT
and then ``UPDATE ... WHERE id IN (:ids) AND state = 'queued' RETURNING *``.
Statements are cached by their shape (queues, paused queues, held prefixes, which
bounds apply), with the volume, the bounds, the limit and the drive as bound parameters:
SQLAlchemy then compiles each shape once and reuses its cache key, where building the
statement anew cost more CPU than running it (fifo claims once per file: issue 18
point 7).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    Update,
    bindparam,
    func,
    inspect,
    not_,
    or_,
    select,
    text,
)

from tssd import domain
from tssd.db.events import REQUESTS
from tssd.db.models import UNLOCATED_SQL, Request
from tssd.db.plans import unindexed
from tssd.db.views import columns_reader
from tssd.domain import Kind
from tssd.lifecycle import Transition, sources, target

C = REQUESTS.c
#: The attribute of :class:`Request` for each column of the table, in column order.
_ATTRS = tuple(inspect(Request).get_property_by_column(c).key for c in REQUESTS.c)
#: Records of rows selected as ``REQUESTS.c`` (the columns taken by position).
_RECORDS = columns_reader(_ATTRS)

#: The one state a claim takes requests from, and the state it moves them to (the
#: lifecycle's ``claim``, tssd.lifecycle).
[_QUEUED] = sources(Transition.CLAIM)
_ACTIVE = target(Transition.CLAIM).value

#: Sort keys of the returned rows (RETURNING keeps no order): the subquery's ORDER BY.
BY_POSITION = "position"
BY_ARRIVAL = "arrival"
BY_PRIORITY = "priority"


def as_requests(rows: Iterable[Sequence[Any]]) -> list[domain.Request]:
    """:class:`tssd.domain.Request` records of rows selected as ``REQUESTS.c`` (in order).

    Made from the values by position, no ORM object in between: this runs once per
    claimed file (``Request(**row)`` through the ORM cost 25 times as much).
    """
    return _RECORDS(rows)


def in_order(requests: list[domain.Request], order: str) -> list[domain.Request]:
    """*requests* in the claim's *order* (that of the subquery that chose them)."""
    if order == BY_POSITION:
        requests.sort(key=lambda r: (r.position if r.position is not None else -1, r.id))
    elif order == BY_PRIORITY:
        requests.sort(key=lambda r: (-(r.priority or 0), r.id))
    else:
        requests.sort(key=lambda r: r.id)
    return requests


def unpaused_c(paused: Sequence[str]) -> tuple[ColumnElement[bool], ...]:
    """Leaves out the requests of the *paused* queues (core columns)."""
    return (C.queue.not_in(list(paused)),) if paused else ()


def outside_c(held: Sequence[str]) -> list[ColumnElement[bool]]:
    """Leaves out recalls whose path starts with one of the *held* prefixes (core)."""
    inside = [C.path.startswith(prefix, autoescape=True) for prefix in held]
    return [or_(C.path.is_(None), not_(cond)) for cond in inside]


@dataclass(frozen=True)
class Claim:
    """A claim's statements: *update* alone (PostgreSQL: a CTE in it chooses the rows), or
    *choose* first and *update* on the ids it found (``b_ids``; SQLite)."""

    update: Update
    choose: Select[Any] | None = None


def _activating(chosen: ColumnElement[bool]) -> Update:
    """The UPDATE making the queued requests *chosen* active, returning them."""
    now = bindparam("b_now", type_=C.started_at.type)
    return (
        REQUESTS.update()
        # Through coalesce: the ids are the look-up, no state index competes (tssd.db.plans).
        .where(chosen, unindexed(C.state) == _QUEUED)
        .values(
            state=_ACTIVE,
            drive=bindparam("b_drive"),
            started_at=now,
            updated_at=now,
            attempts=C.attempts + 1,
            instance=bindparam("b_instance"),
        )
        .returning(*C)
    )


#: The UPDATE of a claim on SQLite: the ids the claim's SELECT found.
_BY_IDS = _activating(C.id.in_(bindparam("b_ids", expanding=True)))


def _claiming(chosen: Select[Any], postgres: bool) -> Claim:
    """The claim of the requests whose ids *chosen* selects.

    PostgreSQL: one statement, *chosen* a materialized CTE with ``FOR UPDATE SKIP
    LOCKED``, run once (as a plain ``IN (subquery)`` it may be rescanned per row, and a
    rescan skips the rows the statement already updated and locks further ones: LIMIT n
    claimed more than n). SQLite: the SELECT, then the UPDATE of the ids it found; as one
    statement SQLite took twice as long (a subquery on the table it updates).
    """
    if not postgres:
        return Claim(_BY_IDS, chosen)
    ids = chosen.with_for_update(skip_locked=True).cte("chosen").prefix_with("MATERIALIZED")
    return Claim(_activating(C.id.in_(select(ids.c.id))))


@functools.lru_cache(maxsize=128)
def recall_claim(
    queues: tuple[str, ...] | None,
    paused: tuple[str, ...],
    held: tuple[str, ...],
    min_priority: bool,
    after: bool,
    by_position: bool,
    postgres: bool,
) -> Claim:
    """Claim of a volume's queued recalls; binds ``b_volume``, ``b_n`` and, when the shape
    has them, ``b_min_priority`` and ``b_after``."""
    chosen = select(C.id).where(
        C.kind == Kind.RECALL.value,
        C.state == _QUEUED,
        C.volume == bindparam("b_volume"),
    )
    if queues is not None:
        chosen = chosen.where(C.queue.in_(list(queues)))
    chosen = chosen.where(*unpaused_c(paused), *outside_c(held))
    if min_priority:
        chosen = chosen.where(C.priority >= bindparam("b_min_priority"))
    if after:
        chosen = chosen.where(C.position > bindparam("b_after"))
    order = (C.position, C.id) if by_position else (C.id,)
    chosen = chosen.order_by(*order).limit(bindparam("b_n", type_=Integer))
    return _claiming(chosen, postgres)


@functools.lru_cache(maxsize=32)
def migration_claim(paused: tuple[str, ...], postgres: bool) -> Claim:
    """Claim of a storage class's queued migrations; binds ``b_storage_class``, ``b_n``."""
    chosen = (
        select(C.id)
        .where(
            C.kind == Kind.MIGRATE.value,
            C.state == _QUEUED,
            C.storage_class == bindparam("b_storage_class"),
            *unpaused_c(paused),
        )
        .order_by(C.priority.desc(), C.id)
        .limit(bindparam("b_n", type_=Integer))
    )
    return _claiming(chosen, postgres)


@functools.lru_cache(maxsize=4)
def removal_claim(postgres: bool) -> Claim:
    """Claim of the oldest queued removals; binds ``b_n``."""
    chosen = (
        select(C.id)
        .where(C.kind == Kind.REMOVE.value, C.state == _QUEUED)
        .order_by(C.id)
        .limit(bindparam("b_n", type_=Integer))
    )
    return _claiming(chosen, postgres)


@functools.lru_cache(maxsize=4)
def ids_claim(postgres: bool) -> Claim:
    """Claim of the requests ``b_ids`` (an expanding list) that are still queued."""
    if not postgres:
        return Claim(_BY_IDS)
    chosen = select(C.id).where(
        C.id.in_(bindparam("b_ids", expanding=True)), unindexed(C.state) == _QUEUED
    )
    return _claiming(chosen, postgres)


#: The oldest queued recalls with no tape copy chosen yet; binds ``b_n``. Spelled as
#: ix_requests_unlocated's predicate: with a million located recalls queued, the few to
#: locate are found without walking the others.
UNLOCATED = (
    select(*C).where(text(UNLOCATED_SQL)).order_by(C.id).limit(bindparam("b_n", type_=Integer))
)


@functools.lru_cache(maxsize=64)
def claimable_volumes(paused: tuple[str, ...], held: tuple[str, ...], first: bool) -> Select[Any]:
    """(volume, priority, id) of the queued, located recalls a session may claim: with
    *first*, the first ``b_n`` in arrival order; else one row per volume, its highest
    priority and its oldest id."""
    queued = (
        C.kind == Kind.RECALL.value,
        C.state == _QUEUED,
        C.volume.is_not(None),
        *unpaused_c(paused),
        *outside_c(held),
    )
    if first:
        stmt = select(C.volume, C.priority, C.id).where(*queued)
        return stmt.order_by(C.id).limit(bindparam("b_n", type_=Integer))
    stmt = select(C.volume, func.max(C.priority), func.min(C.id))
    return stmt.where(*queued).group_by(C.volume)

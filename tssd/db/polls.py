"""What ``tss-hsm`` asks on every call, answered cheaply.

In poll mode dCache calls the script for every pending stage every ``p:delay`` seconds, so
tssd answers thousands of "is recall X done?" questions per second while it runs a
campaign. :class:`PollIndex` keeps the open recalls and migrations by (kind, pnfsid) in
memory, updated by the store on every submit, claim and transition: a poll of an open
request costs a dictionary look-up and a pre-encoded answer, no database round trip.

It is a cache, never the truth: a miss (the request is finished, unknown, or its entry is
older than ``ttl_s``) goes to the database. The age limit matters only when several tssd
instances share one database: a request another instance finished is noticed within
``ttl_s`` at the latest.

:func:`obtain` is the miss path, and the first call of a stage: adopt-or-create in one
transaction (see docs/dcache.md, "What each call does").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.db.models import OPEN_STATES, RequestEvent, State, utcnow
from tssd.db.models import Request as RequestRow
from tssd.db.views import request_record
from tssd.domain import Request
from tssd.submit import SubmitSpec

# Kinds whose requests dCache names by pnfsid (a removal is named by its bfid).
POLLED_KINDS = ("recall", "migrate")
REPORTED = "reported"
REQUESTS = cast(Table, RequestRow.__table__)
EVENTS = cast(Table, RequestEvent.__table__)
_COLUMNS = [getattr(RequestRow, c.key).label(c.key) for c in RequestRow.__mapper__.column_attrs]
_REPORTED = (
    select(RequestEvent.id)
    .where(RequestEvent.request_id == RequestRow.id, RequestEvent.reason == REPORTED)
    .exists()
    .label("reported_")
)
LATEST = (
    select(*_COLUMNS, _REPORTED)
    .where(RequestRow.pnfsid == bindparam("pnfsid"), RequestRow.kind == bindparam("kind"))
    .order_by(RequestRow.id.desc())
    .limit(1)
)


@dataclass(slots=True)
class Entry:
    """An open request as a poll sees it; its answer is encoded once, when first asked."""

    request_id: int
    kind: str
    pnfsid: str
    path: str | None
    state: str
    queue: str
    stamp: float
    #: What a migration must agree on to attach to this one (tssd.api.attach).
    size: int | None = None
    checksum: str | None = None
    encoded: bytes | None = None

    @property
    def answer(self) -> bytes:
        """The body of ``POST /v1/requests/obtain`` adopting this request."""
        if self.encoded is None:
            request = {"id": self.request_id, "kind": self.kind, "state": self.state,
                       "pnfsid": self.pnfsid, "path": self.path, "queue": self.queue}  # fmt: skip
            body = {"created": False, "reported": False, "request": request}
            self.encoded = json.dumps(body, separators=(",", ":")).encode()
        return self.encoded


class PollIndex:
    """Open recalls and migrations by (kind, pnfsid); see the module docstring."""

    def __init__(self, ttl_s: float = 600.0, max_entries: int = 1_000_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._by_key: dict[tuple[str, str], Entry] = {}
        self._key_of: dict[int, tuple[str, str]] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, kind: str, pnfsid: str) -> Entry | None:
        """The open request of *kind* for *pnfsid* (upper-case), if known and fresh."""
        entry = self._by_key.get((kind, pnfsid))
        if entry is None or self.ttl_s <= 0:
            return None
        if time.monotonic() - entry.stamp > self.ttl_s:
            self._drop(entry.request_id)
            return None
        return entry

    def seen(self, rows: Iterable[Any], *, add: bool = True) -> None:
        """Record rows just read or written (anything with Request's attributes).

        Not *add*: only refresh entries already held. Bulk and ENDIT submissions pass
        that: their requests are rarely polled, and at a million pending an entry each
        would cost about half a gigabyte; a poll of one reads the database once and is
        then held.
        """
        if self.ttl_s <= 0:
            return
        for row in rows:
            if row.kind in POLLED_KINDS and row.pnfsid and row.state in OPEN_STATES:
                if add or (row.kind, row.pnfsid) in self._by_key:
                    self._put(Entry(row.id, row.kind, row.pnfsid, row.path, row.state,
                                    row.queue, 0.0, getattr(row, "size", None),
                                    getattr(row, "checksum", None)))  # fmt: skip
            else:
                self._drop(row.id)

    def moved(self, ids: Sequence[int], state: State) -> None:
        """Requests *ids* changed to *state* in this process."""
        for request_id in ids:
            key = self._key_of.get(request_id)
            if key is None:
                continue
            if not state.is_open:
                self._drop(request_id)
                continue
            old = self._by_key[key]
            self._put(Entry(request_id, key[0], key[1], old.path, state.value, old.queue, 0.0,
                            old.size, old.checksum))  # fmt: skip

    def clear(self) -> None:
        self._by_key.clear()
        self._key_of.clear()

    def _put(self, entry: Entry) -> None:
        if len(self._by_key) >= self.max_entries:
            # A cache: dropping it costs database reads, never a wrong answer.
            self.clear()
        key, request_id = (entry.kind, entry.pnfsid), entry.request_id
        stale = self._by_key.get(key)
        if stale is not None and stale.request_id != request_id:
            self._key_of.pop(stale.request_id, None)
        # Not encoded here: most requests (bulk API, ENDIT, simulations) are never polled.
        entry.stamp = time.monotonic()
        self._by_key[key] = entry
        self._key_of[request_id] = key

    def _drop(self, request_id: int) -> None:
        key = self._key_of.pop(request_id, None)
        if key is not None:
            self._by_key.pop(key, None)


@dataclass(frozen=True)
class Obtained:
    """The request a ``tss-hsm`` call is about, and how it was found."""

    created: bool
    row: Request
    reported: bool


async def obtain(engine: AsyncEngine, spec: SubmitSpec, *, adopt_finished: bool) -> Obtained:
    """Adopt the newest request of the spec's kind and pnfsid, or create one: one transaction.

    Adopted: an open request; with *adopt_finished*, also a finished one for the same path
    whose outcome nobody has been told yet. Otherwise a new request and its event row are
    inserted in the same transaction. Raises IntegrityError when a concurrent submit
    created the open request first (the caller retries and then adopts it).
    """
    params = {"pnfsid": spec.key, "kind": spec.kind.value}
    async with engine.begin() as conn:
        row = (await conn.execute(LATEST, params)).first()
        if row is not None and adoptable(
            row, bool(row.reported_), spec.path, adopt_finished=adopt_finished
        ):
            return Obtained(False, request_record(row), bool(row.reported_))
        values = new_request(spec)
        created = (
            await conn.execute(_INSERT, {_COLUMN_KEY[k]: v for k, v in values.items()})
        ).one()
        await conn.execute(
            insert(EVENTS),
            {"request_id": created.id, "at": values["created_at"], "from_state": None,
             "to_state": State.QUEUED.value, "reason": "submitted"},
        )  # fmt: skip
    return Obtained(True, request_record(created), False)


def on_tape_already(row: Any, spec: SubmitSpec) -> bool:
    """Whether *row* is a finished migration of the very file *spec* would migrate.

    dCache re-issues a put whose answer it lost (a pool restart, a killed script). A done
    migration of the same pnfsid whose tape copy has the adler32 the call states, with the
    same size and storage class, answers it: exit 0 and the existing URI on the first call,
    and no new request (the caller checks that the copy was not removed since).
    """
    return (
        row.kind == "migrate"
        and row.state == State.DONE.value
        and bool(row.uri)
        and bool(row.bfid)
        and spec.checksum is not None
        and row.result_adler32 == spec.checksum
        and row.size == spec.size
        and row.storage_class == spec.storage_class
    )


async def copy_removed(engine: AsyncEngine, bfid: str) -> bool:
    """Whether a removal of the tape copy *bfid* has finished."""
    stmt = (
        select(RequestRow.id)
        .where(
            RequestRow.kind == "remove",
            RequestRow.key == bfid,
            RequestRow.state == State.DONE.value,
        )
        .limit(1)
    )
    async with engine.connect() as conn:
        return (await conn.execute(stmt)).first() is not None


def adoptable(row: Any, reported: bool, path: str | None, *, adopt_finished: bool) -> bool:
    if row.state in OPEN_STATES:
        return True
    # An abandoned recall has no file left to report: the next call starts a new one.
    fresh = not reported and row.state != State.ABANDONED.value
    return adopt_finished and fresh and row.path == path


def new_request(spec: SubmitSpec) -> dict[str, Any]:
    """The column values of a new queued request for *spec*."""
    now = utcnow()
    return {
        "kind": spec.kind.value,
        "state": State.QUEUED.value,
        "key": spec.key,
        "pnfsid": spec.pnfsid,
        "path": spec.path,
        "size": spec.size,
        "storage_class": spec.storage_class,
        "checksum": spec.checksum,
        "hsm_type": spec.hsm_type,
        "hsm_instance": spec.hsm_instance,
        "store": spec.store,
        "group": spec.group,
        "bfid": spec.bfid,
        "uri": spec.uris[0] if spec.kind.value == "remove" and spec.uris else None,
        "queue": spec.queue,
        "priority": spec.priority,
        "delivery": spec.delivery,
        "owner_uid": spec.owner_uid,
        "attempts": 0,
        "created_at": now,
        "updated_at": now,
    }


# Labels are the ORM attribute names (``group``, not the column ``grp``): request_json
# reads the row like a Request.
_INSERT = insert(REQUESTS).returning(*_COLUMNS)
_COLUMN_KEY = {attr.key: attr.columns[0].key for attr in RequestRow.__mapper__.column_attrs}

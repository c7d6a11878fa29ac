"""The request history's and the retention purge's contract (tssd/ports/history.py), one
suite on every implementation: SQL on SQLite and PostgreSQL (skipped without a server, a
failure under ``CI=true``), and the in-memory store's (tssd/db/memory_history.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from store_contract import STORES, activate, end, migrate, open_store, recall, submit

from tssd.clock import utcnow
from tssd.db.interface import RequestStoreInterface
from tssd.db.lookups import SqlHistory
from tssd.db.memory import MemoryStore
from tssd.db.memory_history import MemoryHistory, MemoryRetention
from tssd.db.models import Request as RequestRow
from tssd.db.retention import SqlRetention, purge
from tssd.db.store import RequestStore
from tssd.domain import Request, State
from tssd.ports.history import Purged, RequestHistory, Retention, StateEvent
from tssd.submit import parse_submit

OLD = timedelta(days=40)
CUTOFF = timedelta(days=30)


@dataclass
class Opened:
    store: RequestStoreInterface
    history: RequestHistory
    retention: Retention


@pytest.fixture(params=STORES)
async def db(request: pytest.FixtureRequest) -> AsyncIterator[Opened]:
    async with open_store(request) as store:
        if isinstance(store, MemoryStore):
            yield Opened(store, MemoryHistory(store), MemoryRetention(store))
        else:
            assert isinstance(store, RequestStore)
            yield Opened(store, SqlHistory(store.sessions), SqlRetention(store.sessions))


async def cancelled_long_ago(store: RequestStoreInterface, request_id: int) -> None:
    """Cancel *request_id* and date its end back: a cancel always ends it now."""
    await end(store, [request_id], State.CANCELLED)
    at = utcnow() - OLD
    if isinstance(store, MemoryStore):
        store._rows[request_id]["finished_at"] = at
        return
    assert isinstance(store, RequestStore)
    async with store.sessions.begin() as session:
        stmt = update(RequestRow).where(RequestRow.id == request_id).values(finished_at=at)
        await session.execute(stmt)


def ids(rows: Sequence[Request]) -> list[int]:
    return sorted(r.id for r in rows)


def claimed_recall(pnfsid: str, **extra: Any) -> Any:
    body = {"kind": "recall", "pnfsid": pnfsid, "path": f"/pool/{pnfsid}", "delivery": "claim"}
    return parse_submit({**body, **extra})


async def test_both_ports_are_implemented(db: Opened) -> None:
    assert isinstance(db.history, RequestHistory)
    assert isinstance(db.retention, Retention)


# -- requests ---------------------------------------------------------------------------


async def test_requests_by_id_gives_the_current_records_of_those_that_exist(db: Opened) -> None:
    a, b, c = await submit(db.store, recall("00A1"), recall("00A2"), migrate("00A3"))
    await end(db.store, [b], State.DONE)
    found = await db.history.requests_by_id([c, 999_999, b])
    assert ids(found) == sorted([b, c]) and all(type(r) is Request for r in found)
    assert {r.id: r.state for r in found} == {b: "done", c: "queued"}
    assert await db.history.requests_by_id([]) == []
    # More ids than one IN list binds.
    many = await db.history.requests_by_id([a, *range(10_000, 11_200)])
    assert ids(many) == [a]


async def test_open_transfers_under_takes_the_path_prefix_literally(db: Opened) -> None:
    base = "/e/d_1/"
    inside = await submit(
        db.store,
        recall("00B1", path=f"{base}in/00B1"),
        migrate("00B2", path=f"{base}out/00B2"),
    )
    active = await submit(db.store, recall("00B3", path=f"{base}in/00B3"))
    await activate(db.store, active)
    [finished] = await submit(db.store, recall("00B4", path=f"{base}in/00B4"))
    await end(db.store, [finished], State.DONE)
    # '_' is no wildcard, and another directory's requests are not this one's.
    await submit(db.store, recall("00B5", path="/e/dX1/in/00B5"), recall("00B6", path="/f/x"))
    everything = await db.history.open_transfers_under(base)
    assert ids(everything) == sorted([*inside, *active])
    some = await db.history.open_transfers_under(base, [inside[1], finished, 999_999])
    assert ids(some) == [inside[1]]
    assert await db.history.open_transfers_under(base, []) == []


async def test_all_recalls_are_the_recalls_in_every_state(db: Opened) -> None:
    queued, done, failed = await submit(db.store, recall("00C1"), recall("00C2"), recall("00C3"))
    await end(db.store, [done], State.DONE)
    await end(db.store, [failed], State.FAILED)
    await submit(db.store, migrate("00C4"))
    recalls = await db.history.all_recalls()
    assert ids(recalls) == sorted([queued, done, failed])
    assert {r.kind for r in recalls} == {"recall"}


# -- events -----------------------------------------------------------------------------


async def test_events_are_read_after_an_id_in_the_order_recorded(db: Opened) -> None:
    assert await db.history.last_event_id() == 0
    assert await db.history.events_after(0) == []
    a, b = await submit(db.store, recall("00D1"), recall("00D2"))
    submitted = await db.history.events_after(0)
    assert all(type(e) is StateEvent for e in submitted)
    assert sorted((e.request_id, e.to_state) for e in submitted) == [(a, "queued"), (b, "queued")]
    seen = await db.history.last_event_id()
    assert seen == max(e.id for e in submitted) > 0
    assert await db.history.events_after(seen) == []
    await end(db.store, [a], State.DONE)
    later = sorted(await db.history.events_after(seen), key=lambda e: e.id)
    assert [(e.request_id, e.to_state) for e in later] == [(a, "active"), (a, "done")]
    assert all(e.id > seen for e in later)
    assert await db.history.last_event_id() == later[-1].id


# -- delivery ---------------------------------------------------------------------------


async def test_unclaimed_recalls_are_done_claim_recalls_finished_before_the_cutoff(
    db: Opened,
) -> None:
    old, fresh, reported, failed, plain = await submit(
        db.store,
        claimed_recall("00E1"), claimed_recall("00E2"), claimed_recall("00E3"),
        claimed_recall("00E4"), recall("00E5"),
    )  # fmt: skip
    long_ago = utcnow() - OLD
    await end(db.store, [old, reported, plain], State.DONE, finished_at=long_ago)
    await end(db.store, [fresh], State.DONE)
    await end(db.store, [failed], State.FAILED, finished_at=long_ago)
    await db.store.mark_reported(reported)  # claimed by a pool call
    cutoff = utcnow() - CUTOFF
    [found] = await db.history.unclaimed_recalls("claim", cutoff, 10)
    assert (found.id, found.path, found.pnfsid, found.queue) == (
        old,
        "/pool/00E1",
        "00E1",
        "default",
    )
    later = utcnow() + timedelta(seconds=1)
    assert sorted(u.id for u in await db.history.unclaimed_recalls("claim", later, 10)) == [
        old,
        fresh,
    ]
    assert len(await db.history.unclaimed_recalls("claim", later, 1)) == 1
    assert [u.id for u in await db.history.unclaimed_recalls("claimed", later, 10)] == [reported]


# -- retention --------------------------------------------------------------------------


async def test_a_batch_deletes_the_oldest_finished_requests_with_their_events(
    db: Opened,
) -> None:
    first, second, third, recent, queued, active = await submit(
        db.store, recall("00F1"), recall("00F2"), migrate("00F3"), recall("00F4"),
        recall("00F5"), recall("00F6"),
    )  # fmt: skip
    now = utcnow()
    await end(db.store, [first], State.DONE, finished_at=now - OLD - timedelta(hours=2))
    await end(db.store, [second], State.FAILED, finished_at=now - OLD - timedelta(hours=1))
    await cancelled_long_ago(db.store, third)
    await end(db.store, [recent], State.DONE)
    await activate(db.store, [active])
    cutoff = now - CUTOFF
    assert await db.retention.purge_batch(cutoff, 2) == Purged(2, 2)
    left = await db.history.requests_by_id([first, second, third, recent, queued, active])
    assert ids(left) == sorted([third, recent, queued, active])  # the oldest two went
    assert await db.retention.purge_batch(cutoff, 2) == Purged(1, 1)
    assert await db.retention.purge_batch(cutoff, 2) == Purged(0, 0)
    kept = sorted([recent, queued, active])
    assert ids(await db.history.requests_by_id(list(range(1, 100)))) == kept
    # Their events went with them; the kept requests keep theirs.
    assert {e.request_id for e in await db.history.events_after(0)} == set(kept)


async def test_purge_runs_batches_to_the_end_and_the_store_goes_on(db: Opened) -> None:
    made = await submit(db.store, *(recall(f"0D0{i}") for i in range(7)))
    await end(db.store, made, State.DONE, finished_at=utcnow() - OLD)
    batches: list[int] = []
    assert await purge(db.retention, utcnow() - CUTOFF, batch=3, counted=batches.append) == 7
    assert batches == [3, 3, 1]
    assert await db.history.all_recalls() == []
    assert await db.store.latest("recall", "0D01") is None
    # The keys are free again, and new requests are recorded as before.
    [again] = await submit(db.store, recall("0D01"))
    assert (await db.store.get(again)).state == "queued"
    assert await purge(db.retention, utcnow() - CUTOFF, batch=3) == 0

"""The request store's contract (tssd/db/interface.py), one suite on every implementation.

Each test runs on SQLite, on PostgreSQL (skipped without a server, a failure under
``CI=true``) and on the in-memory store, so the memory store stays a faithful stand-in
for tests that use it instead of a database. The scheduler's reads and claims:
test_store_contract_scheduling.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from store_contract import (
    OPEN,
    STORES,
    activate,
    history,
    migrate,
    open_store,
    recall,
    set_queue,
    state_of,
    submit,
)

from tssd.db.interface import RequestStoreInterface
from tssd.db.pages import ListFilter
from tssd.domain import Kind, State
from tssd.errors import Conflict, NotFound
from tssd.submit import parse_submit
from tssd.work import Noted


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RequestStoreInterface]:
    async with open_store(request) as opened:
        yield opened


async def test_the_store_has_every_member_of_the_interface(store: RequestStoreInterface) -> None:
    # mypy checks the signatures (tssd/db/memory.py, _conforms); this, that none is missing.
    assert isinstance(store, RequestStoreInterface)


# -- submit ---------------------------------------------------------------------------------


async def test_submit_creates_queued_requests_with_their_history(
    store: RequestStoreInterface,
) -> None:
    [(created, row)] = await store.submit([recall(queue="atlas", priority=5)])
    assert created
    assert (row.kind, row.state, row.key, row.pnfsid, row.queue, row.priority, row.attempts) == (
        "recall", "queued", "00AA", "00AA", "atlas", 5, 0
    )  # fmt: skip
    assert (row.volume, row.drive, row.finished_at) == (None, None, None)
    assert await history(store, row.id) == [(None, "queued", "submitted")]
    assert store.work.is_set()
    assert store.work.peek() == Noted(submitted=frozenset({Kind.RECALL}))


async def test_submit_attaches_to_the_open_request_of_a_key(store: RequestStoreInterface) -> None:
    [first] = await submit(store, recall())
    results = await store.submit([recall(path="/other/00AA"), recall("00CC"), recall("00CC")])
    assert (results[0][0], results[0][1].id) == (False, first)
    # Specs of one batch sharing a key share one new request, each reported as created.
    assert results[1][0] and results[2][0] and results[1][1].id == results[2][1].id
    # The same key of another kind is another request.
    [(created, other)] = await store.submit([migrate("00AA")])
    assert created and other.id not in (first, results[1][1].id)
    assert len(await store.list_requests(ListFilter())) == 3


async def test_a_finished_request_does_not_hold_its_key(store: RequestStoreInterface) -> None:
    [first] = await submit(store, recall())
    await store.transition([first], OPEN, State.FAILED)
    [(created, row)] = await store.submit([recall()])
    assert created and row.id != first


# -- obtain ---------------------------------------------------------------------------------


async def test_obtain_creates_then_adopts_open_and_unreported_finished(
    store: RequestStoreInterface,
) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    assert (first.created, first.reported, first.row.state) == (True, False, "queued")
    again = await store.obtain(recall(path="/elsewhere"), adopt_finished=False)
    assert (again.created, again.row.id) == (False, first.row.id)
    await store.transition([first.row.id], OPEN, State.DONE)
    done = await store.obtain(recall(), adopt_finished=True)
    assert (done.created, done.reported, done.row.id) == (False, False, first.row.id)
    # Another path, or adopting open requests only: a new recall.
    assert (await store.obtain(recall(path="/elsewhere"), adopt_finished=True)).created


async def test_obtain_does_not_adopt_a_reported_or_abandoned_request(
    store: RequestStoreInterface,
) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    await store.transition([first.row.id], OPEN, State.DONE)
    await store.mark_reported(first.row.id)
    second = await store.obtain(recall(), adopt_finished=True)
    assert second.created and second.row.id != first.row.id
    await store.transition([second.row.id], OPEN, State.ABANDONED)
    assert (await store.obtain(recall(), adopt_finished=True)).created


async def test_obtain_answers_a_reissued_put_from_its_done_migration(
    store: RequestStoreInterface,
) -> None:
    first = await store.obtain(migrate(), adopt_finished=False)
    done = {"uri": "osm://osm/?bfid=B1", "bfid": "B1", "result_adler32": "0000abcd"}
    await store.transition([first.row.id], OPEN, State.DONE, values=done)
    await store.mark_reported(first.row.id)
    again = await store.obtain(migrate(), adopt_finished=False)
    assert (again.created, again.reported, again.row.uri) == (False, True, done["uri"])
    # Once its tape copy is removed, the put writes the file again.
    removal = parse_submit({"kind": "remove", "bfid": "B1"})
    [(_, rm)] = await store.submit([removal])
    await store.transition([rm.id], OPEN, State.DONE)
    assert (await store.obtain(migrate(), adopt_finished=False)).created


# -- queries --------------------------------------------------------------------------------


async def test_get_returns_a_snapshot_or_raises(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    row = await store.get(rid)
    row.state = "done"
    assert await state_of(store, rid) == "queued"
    with pytest.raises(NotFound):
        await store.get(rid + 1000)


async def test_times_come_back_timezone_aware_at_the_instant_written(
    store: RequestStoreInterface,
) -> None:
    """SQLite has no time zones: the column type writes UTC and reads it back aware, so
    nothing above the store mends naive datetimes (a time in another zone keeps its
    instant, not its wall time)."""
    [rid] = await submit(store, recall())
    finished = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    await store.transition([rid], OPEN, State.DONE, values={"finished_at": finished})
    row = await store.get(rid)
    [listed] = await store.list_requests(ListFilter())
    for stamp in (row.created_at, row.updated_at, row.finished_at, listed.created_at):
        assert stamp is not None and stamp.utcoffset() is not None
    assert row.finished_at == finished == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def test_list_requests_filters_and_pages_in_id_order(store: RequestStoreInterface) -> None:
    ids = await submit(
        store, recall("0001", queue="a"), recall("0002", queue="b"), recall("0003", queue="a")
    )
    await store.set_locations({ids[2]: ("VOL001", 7)})
    await store.transition([ids[1]], OPEN, State.DONE)

    async def listed(**fields: Any) -> list[int]:
        return [r.id for r in await store.list_requests(ListFilter(**fields))]

    assert await listed() == ids
    assert await listed(queue="a") == [ids[0], ids[2]]
    assert await listed(state="queued", limit=1) == [ids[0]]
    assert await listed(after=ids[0]) == ids[1:]
    assert await listed(volume="VOL001", pnfsid="0003", kind="recall") == [ids[2]]
    assert await listed(kind="migrate") == []


async def test_query_reports_a_batch(store: RequestStoreInterface) -> None:
    ids = await submit(store, recall("0001", size=5), recall("0002", size=7), recall("0003"))
    await store.transition([ids[0]], OPEN, State.DONE)
    await store.transition([ids[1]], OPEN, State.FAILED, values={"error": "boom"})
    result = await store.query([*ids, 999_999])
    assert {k: v for k, v in result["counts"].items() if v} == {"done": 1, "failed": 1, "queued": 1}
    assert set(result["counts"]) == {s.value for s in State}
    assert (result["bytes_total"], result["bytes_done"]) == (12, 5)
    assert result["missing"] == [999_999]
    assert [(r.id, r.error) for r in result["failed"]] == [(ids[1], "boom")]


async def test_counts_group_by_kind_queue_and_state(store: RequestStoreInterface) -> None:
    assert await store.counts() == []
    ids = await submit(store, recall("0001", queue="a"), recall("0002", queue="a"), migrate())
    await store.transition([ids[1]], OPEN, State.CANCELLED)
    assert sorted(await store.counts()) == [
        ("migrate", "default", "queued", 1), ("recall", "a", "cancelled", 1),
        ("recall", "a", "queued", 1),
    ]  # fmt: skip


async def test_queues_lists_the_configured_queues(store: RequestStoreInterface) -> None:
    assert await store.queues() == []
    await set_queue(store, "atlas", priority=3, max_drives=2, paused=True)
    assert await store.queues() == [
        {"name": "atlas", "priority": 3, "max_drives": 2, "paused": True,
         "latency_target_s": None}
    ]  # fmt: skip


async def test_wait_returns_at_the_finish_or_the_timeout(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    row, finished = await store.wait(rid, 0.05)
    assert (row.state, finished) == ("queued", False)
    waiter = asyncio.create_task(store.wait(rid, 10.0))
    await asyncio.sleep(0.05)
    await activate(store, [rid])
    assert not waiter.done()  # active is not finished
    assert await store.finish(rid, State.DONE)
    row, finished = await asyncio.wait_for(waiter, 5.0)
    assert (row.state, finished) == ("done", True)
    with pytest.raises(NotFound):
        await store.wait(rid + 1000, 0.01)


async def test_latest_finds_the_newest_request_of_a_file(store: RequestStoreInterface) -> None:
    assert await store.latest("recall", "00AA") is None
    [first] = await submit(store, recall())
    await store.transition([first], OPEN, State.DONE)
    found = await store.latest("recall", "00AA")
    assert found is not None and (found[0].id, found[0].state, found[1]) == (first, "done", False)
    await store.mark_reported(first)
    found = await store.latest("recall", "00AA")
    assert found is not None and found[1] and found[0].reported_
    [second] = await submit(store, recall())
    found = await store.latest("recall", "00AA")
    assert found is not None and (found[0].id, found[1]) == (second, False)
    assert await store.latest("migrate", "00AA") is None


async def test_mark_reported_records_the_report_once_finished(
    store: RequestStoreInterface,
) -> None:
    [rid] = await submit(store, recall(delivery="claim"))
    with pytest.raises(Conflict):
        await store.mark_reported(rid)
    with pytest.raises(NotFound):
        await store.mark_reported(rid + 1000)
    await store.transition([rid], OPEN, State.DONE)
    assert (await store.mark_reported(rid)).delivery == "claimed"
    assert (await store.mark_reported(rid)).state == "done"  # idempotent
    assert (await history(store, rid))[-1] == ("done", "done", "reported")


# -- operator actions -----------------------------------------------------------------------


async def test_cancel_finishes_an_open_request_only(store: RequestStoreInterface) -> None:
    [rid, other] = await submit(store, recall("0001"), recall("0002"))
    row = await store.cancel(rid, "not needed")
    assert (row.state, row.error) == ("cancelled", "not needed")
    assert row.finished_at is not None
    await store.transition([other], OPEN, State.DONE)
    with pytest.raises(Conflict):
        await store.cancel(other)
    assert await state_of(store, other) == "done"  # never overwritten
    with pytest.raises(NotFound):
        await store.cancel(rid + 1000)


async def test_retry_requeues_a_failed_request(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    await activate(store, [rid])
    await store.finish(rid, State.FAILED, "tape error", error="bad block", error_code=30)
    store.work.clear()
    row = await store.retry(rid)
    assert (row.state, row.error, row.error_code, row.finished_at, row.attempts) == (
        "queued", None, None, None, 0
    )  # fmt: skip
    assert store.work.is_set()
    with pytest.raises(Conflict):
        await store.retry(rid)  # queued
    with pytest.raises(NotFound):
        await store.retry(rid + 1000)


async def test_retry_refuses_a_second_open_request_of_a_key(
    store: RequestStoreInterface,
) -> None:
    [first] = await submit(store, recall())
    await store.cancel(first)
    [second] = await submit(store, recall())
    with pytest.raises(Conflict):
        await store.retry(first)
    assert (await state_of(store, first), await state_of(store, second)) == (
        "cancelled", "queued"
    )  # fmt: skip


# -- scheduler side -------------------------------------------------------------------------


async def test_transition_moves_only_requests_in_the_given_states(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"), recall("0003"))
    await store.transition([ids[2]], OPEN, State.DONE)
    moved = await store.transition(
        ids, ("queued",), State.ACTIVE, reason="mine", values={"drive": "d1"}
    )
    assert moved == ids[:2]
    assert [(r.state, r.drive) for r in await store.list_requests(ListFilter())] == [
        ("active", "d1"), ("active", "d1"), ("done", None)
    ]  # fmt: skip
    assert (await history(store, ids[0]))[-1] == (None, "active", "mine")
    assert await store.transition([ids[0]], ("queued",), State.DONE) == []
    assert await store.transition([], OPEN, State.DONE) == []
    assert await store.transition([999_999], OPEN, State.DONE) == []


async def test_transition_wakes_waiters_listeners_and_the_scheduler(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"))
    heard: list[int] = []
    # Listeners are given at construction (tssd.app); the test adds one to the store made.
    store.notifier.listeners = (*store.notifier.listeners, heard.extend)
    event = store.notifier.watch(ids[0])
    await store.transition(ids, OPEN, State.ACTIVE)
    assert not event.is_set() and heard == []
    store.work.clear()
    store.work.take()
    await store.transition([ids[1]], ("active",), State.QUEUED)
    assert store.work.is_set() and store.work.take() == Noted(everything=True)
    await store.transition([ids[0]], ("active",), State.DONE)
    assert event.is_set() and heard == [ids[0]]
    store.notifier.unwatch(ids[0], event)


async def test_transition_keeps_one_open_request_per_key(store: RequestStoreInterface) -> None:
    [first] = await submit(store, recall())
    await store.transition([first], OPEN, State.FAILED)
    [second, other] = await submit(store, recall(), recall("0002"))
    await store.transition([other], OPEN, State.FAILED)
    with pytest.raises(IntegrityError):
        await store.transition([first, other], ("failed",), State.QUEUED)
    # Nothing moved: the change is all or nothing.
    assert [await state_of(store, i) for i in (first, second, other)] == [
        "failed", "queued", "failed"
    ]  # fmt: skip


async def test_finish_changes_an_active_request_only(store: RequestStoreInterface) -> None:
    [rid, cancelled] = await submit(store, recall("0001"), recall("0002"))
    assert not await store.finish(rid, State.DONE)  # queued, not active
    await activate(store, [rid, cancelled])
    await store.cancel(cancelled)
    assert not await store.finish(cancelled, State.DONE)
    assert await state_of(store, cancelled) == "cancelled"
    assert await store.finish(rid, State.DONE, "read", result_adler32="0000abcd")
    row = await store.get(rid)
    assert (row.state, row.result_adler32) == ("done", "0000abcd")
    assert row.finished_at is not None
    assert (await history(store, rid))[-1] == (None, "done", "read")


async def test_requeue_active_returns_this_instances_requests(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"), recall("0003"))
    await activate(store, ids[:1], instance="me", drive="d1")
    await activate(store, ids[1:2], instance="other", drive="d2")
    await activate(store, ids[2:], drive="d3")
    store.instance = "me"
    assert await store.requeue_active("restarted") == 2
    rows = await store.list_requests(ListFilter())
    assert [(r.state, r.drive) for r in rows] == [
        ("queued", None), ("active", "d2"), ("queued", None)
    ]  # fmt: skip
    assert rows[0].started_at is None
    store.instance = None
    assert await store.requeue_active("restarted") == 1


async def test_set_locations_records_volume_and_position(store: RequestStoreInterface) -> None:
    ids = await submit(store, recall("0001"), recall("0002"))
    await store.set_locations({ids[0]: ("VOL001", 10), ids[1]: ("VOL002", 3)})
    await store.set_locations({})
    rows = await store.list_requests(ListFilter())
    assert [(r.volume, r.position, r.state) for r in rows] == [
        ("VOL001", 10, "queued"), ("VOL002", 3, "queued")
    ]  # fmt: skip
    assert await history(store, ids[0]) == [(None, "queued", "submitted")]


async def test_the_poll_index_follows_every_change(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    entry = store.polls.lookup("recall", "00AA")
    assert entry is not None and (entry.request_id, entry.state) == (rid, "queued")
    await activate(store, [rid])
    entry = store.polls.lookup("recall", "00AA")
    assert entry is not None and entry.state == "active"
    await store.finish(rid, State.DONE)
    assert store.polls.lookup("recall", "00AA") is None
    await submit(store, recall("0002"), recall("0003"))  # a batch is not indexed
    assert store.polls.lookup("recall", "0002") is None

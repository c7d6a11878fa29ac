"""The request store's contract (tssd/db/interface.py), one suite on every implementation.

Each test runs on SQLite, on PostgreSQL (skipped without a server, a failure under
``CI=true``) and on the in-memory store, so the memory store stays a faithful stand-in
for tests that use it instead of a database. The scheduler's reads and claims:
test_store_contract_scheduling.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from store_contract import (
    STORES,
    activate,
    end,
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
from tssd.domain import Kind, Request, State
from tssd.errors import Conflict, NotFound
from tssd.lifecycle import LIFECYCLE, Transition
from tssd.submit import parse_submit
from tssd.work import Noted


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RequestStoreInterface]:
    async with open_store(request) as opened:
        yield opened


async def test_the_store_has_every_member_of_the_interface(store: RequestStoreInterface) -> None:
    # mypy checks the signatures (tssd/db/memory.py, _conforms); this, that none is missing.
    assert isinstance(store, RequestStoreInterface)


async def test_every_request_handed_out_is_a_frozen_domain_record(
    store: RequestStoreInterface,
) -> None:
    """Never an ORM row above db/: a record, whose change is a store call, not an attribute."""
    [(_, row)] = await store.submit([recall()])
    found = await store.obtain(migrate(), adopt_finished=False)
    handed = [row, found.row, await store.get(row.id)]
    handed += await store.list_requests(ListFilter())
    handed += [await store.cancel_request(row.id), (await store.wait(row.id, 0.01))[0]]
    handed += [await store.mark_reported(row.id), *(await store.query([row.id]))["failed"]]
    latest = await store.latest("recall", "00AA")
    handed += [*([latest[0]] if latest else []), await store.retry_request(row.id)]
    assert len(handed) == 11 and all(type(r) is Request for r in handed)
    assert (handed[2].kind, handed[2].state) == (Kind.RECALL, State.QUEUED)
    with pytest.raises(AttributeError):  # frozen
        handed[2].state = State.DONE  # type: ignore[misc]


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
    await end(store, [first], State.FAILED)
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
    await end(store, [first.row.id], State.DONE)
    done = await store.obtain(recall(), adopt_finished=True)
    assert (done.created, done.reported, done.row.id) == (False, False, first.row.id)
    # Another path, or adopting open requests only: a new recall.
    assert (await store.obtain(recall(path="/elsewhere"), adopt_finished=True)).created


async def test_obtain_does_not_adopt_a_reported_or_abandoned_request(
    store: RequestStoreInterface,
) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    await end(store, [first.row.id], State.DONE)
    await store.mark_reported(first.row.id)
    second = await store.obtain(recall(), adopt_finished=True)
    assert second.created and second.row.id != first.row.id
    await end(store, [second.row.id], State.ABANDONED)
    assert (await store.obtain(recall(), adopt_finished=True)).created


async def test_obtain_answers_a_reissued_put_from_its_done_migration(
    store: RequestStoreInterface,
) -> None:
    first = await store.obtain(migrate(), adopt_finished=False)
    done = {"uri": "osm://osm/?bfid=B1", "bfid": "B1", "result_adler32": "0000abcd"}
    await end(store, [first.row.id], State.DONE, **done)
    await store.mark_reported(first.row.id)
    again = await store.obtain(migrate(), adopt_finished=False)
    assert (again.created, again.reported, again.row.uri) == (False, True, done["uri"])
    # Once its tape copy is removed, the put writes the file again.
    removal = parse_submit({"kind": "remove", "bfid": "B1"})
    [(_, rm)] = await store.submit([removal])
    await end(store, [rm.id], State.DONE)
    assert (await store.obtain(migrate(), adopt_finished=False)).created


# -- queries --------------------------------------------------------------------------------


async def test_get_returns_a_snapshot_or_raises(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    row = await store.get(rid)
    with pytest.raises(AttributeError):  # a frozen record: a change is a store call
        row.state = State.DONE  # type: ignore[misc]
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
    await end(store, [rid], State.DONE, **{"finished_at": finished})
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
    await end(store, [ids[1]], State.DONE)

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
    await end(store, [ids[0]], State.DONE)
    await end(store, [ids[1]], State.FAILED, **{"error": "boom"})
    result = await store.query([*ids, 999_999])
    assert {k: v for k, v in result["counts"].items() if v} == {"done": 1, "failed": 1, "queued": 1}
    assert set(result["counts"]) == {s.value for s in State}
    assert (result["bytes_total"], result["bytes_done"]) == (12, 5)
    assert result["missing"] == [999_999]
    assert [(r.id, r.error) for r in result["failed"]] == [(ids[1], "boom")]


async def test_counts_group_by_kind_queue_and_state(store: RequestStoreInterface) -> None:
    assert await store.counts() == []
    ids = await submit(store, recall("0001", queue="a"), recall("0002", queue="a"), migrate())
    await end(store, [ids[1]], State.CANCELLED)
    assert sorted(await store.counts()) == [
        ("migrate", "default", "queued", 1), ("recall", "a", "cancelled", 1),
        ("recall", "a", "queued", 1),
    ]  # fmt: skip


async def test_count_open_counts_queued_and_active_requests(
    store: RequestStoreInterface,
) -> None:
    assert await store.count_open() == 0
    ids = await submit(store, recall("0001"), recall("0002"), migrate(), recall("0003"))
    await activate(store, [ids[1]])
    await end(store, [ids[3]], State.CANCELLED)
    assert await store.count_open() == 3
    assert await store.finish(ids[1], "test")
    assert await store.count_open() == 2


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
    assert await store.finish(rid)
    row, finished = await asyncio.wait_for(waiter, 5.0)
    assert (row.state, finished) == ("done", True)
    with pytest.raises(NotFound):
        await store.wait(rid + 1000, 0.01)


async def test_latest_finds_the_newest_request_of_a_file(store: RequestStoreInterface) -> None:
    assert await store.latest("recall", "00AA") is None
    [first] = await submit(store, recall())
    await end(store, [first], State.DONE)
    found = await store.latest("recall", "00AA")
    assert found is not None and (found[0].id, found[0].state, found[1]) == (first, "done", False)
    await store.mark_reported(first)
    found = await store.latest("recall", "00AA")
    assert found is not None and found[1] and isinstance(found[0], Request)
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
    await end(store, [rid], State.DONE)
    assert (await store.mark_reported(rid)).delivery == "claimed"
    assert (await store.mark_reported(rid)).state == "done"  # idempotent
    assert (await history(store, rid))[-1] == ("done", "done", "reported")


# -- operator actions -----------------------------------------------------------------------


async def test_cancel_finishes_an_open_request_only(store: RequestStoreInterface) -> None:
    [rid, other] = await submit(store, recall("0001"), recall("0002"))
    row = await store.cancel_request(rid, "not needed")
    assert (row.state, row.error) == ("cancelled", "not needed")
    assert row.finished_at is not None
    await end(store, [other], State.DONE)
    with pytest.raises(Conflict):
        await store.cancel_request(other)
    assert await state_of(store, other) == "done"  # never overwritten
    with pytest.raises(NotFound):
        await store.cancel_request(rid + 1000)


async def test_retry_requeues_a_failed_request(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall())
    await activate(store, [rid])
    await store.fail(rid, "tape error", error="bad block", error_code=30)
    store.work.clear()
    row = await store.retry_request(rid)
    assert (row.state, row.error, row.error_code, row.finished_at, row.attempts) == (
        "queued", None, None, None, 0
    )  # fmt: skip
    assert store.work.is_set()
    with pytest.raises(Conflict):
        await store.retry_request(rid)  # queued
    with pytest.raises(NotFound):
        await store.retry_request(rid + 1000)


async def test_retry_refuses_a_second_open_request_of_a_key(
    store: RequestStoreInterface,
) -> None:
    [first] = await submit(store, recall())
    await store.cancel_request(first)
    [second] = await submit(store, recall())
    with pytest.raises(Conflict):
        await store.retry_request(first)
    assert (await state_of(store, first), await state_of(store, second)) == (
        "cancelled", "queued"
    )  # fmt: skip


# -- scheduler side -------------------------------------------------------------------------


#: Each named transition of the ledger, applied to *ids*: the ids that moved.
LEDGER: dict[Transition, Callable[[RequestStoreInterface, list[int]], Awaitable[list[int]]]] = {
    Transition.REQUEUE: lambda store, ids: store.requeue(ids, "session ended"),
    Transition.RELOCATE: lambda store, ids: store.relocate(ids, "copy moved"),
    Transition.RESTART: lambda store, ids: store.restart(ids, "lease lost"),
    Transition.REJECT: lambda store, ids: store.reject(ids, "NoCopy", error="e", error_code=2),
    Transition.WITHDRAW: lambda store, ids: store.withdraw(ids, "withdrawn"),
    Transition.CANCEL: lambda store, ids: store.cancel(ids, "cancelled"),
    Transition.ABANDON: lambda store, ids: store.abandon(ids, "abandoned", error="e"),
    Transition.RETRY: lambda store, ids: store.retry(ids, "retried"),
}


async def _one_by_one(
    store: RequestStoreInterface, ids: list[int], transition: Transition
) -> list[int]:
    ending = store.finish if transition is Transition.FINISH else store.fail
    return [i for i in ids if await ending(i, "read")]


async def _claim(store: RequestStoreInterface, ids: list[int]) -> list[int]:
    return sorted(r.id for r in await store.scheduling.claim_ids(ids, "d1"))


async def _one_in_each_state(store: RequestStoreInterface) -> dict[State, int]:
    """A request in every state, each of its own key."""
    ids = await submit(store, *(recall(f"{n:04d}") for n in range(len(State))))
    by_state = dict(zip(State, ids, strict=True))
    await activate(store, [by_state[State.ACTIVE]])
    for state in (State.DONE, State.FAILED, State.CANCELLED, State.ABANDONED):
        await end(store, [by_state[state]], state)
    return by_state


@pytest.mark.parametrize("transition", list(Transition), ids=str)
async def test_each_named_transition_moves_exactly_its_from_states(
    store: RequestStoreInterface, transition: Transition
) -> None:
    by_state = await _one_in_each_state(store)
    ids = list(by_state.values())
    before = {i: (await store.get(i), await history(store, i)) for i in ids}
    if transition is Transition.CLAIM:
        moved = await _claim(store, ids)
    elif transition in (Transition.FINISH, Transition.FAIL):
        moved = await _one_by_one(store, ids, transition)
    else:
        moved = sorted(await LEDGER[transition](store, ids))
    move = LIFECYCLE[transition]
    assert moved == sorted(by_state[s] for s in move.sources)
    for state, request_id in by_state.items():
        row = await store.get(request_id)
        if request_id in moved:
            assert row.state == move.target
            if transition is not Transition.CLAIM:
                assert (await history(store, request_id))[-1][1] == move.target
        else:  # untouched: no column written, no event
            assert row.state == state
            assert row.updated_at == before[request_id][0].updated_at
            assert await history(store, request_id) == before[request_id][1]
    assert await LEDGER.get(transition, _claim)(store, []) == []


async def test_the_ledger_writes_the_columns_of_each_transition(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"), recall("0003"), recall("0004"))
    await store.set_locations({i: ("VOL1", 3) for i in ids})
    await activate(store, ids, drive="d1")
    assert await store.requeue(ids[:1], "transient backend error", error="busy") == ids[:1]
    assert await store.relocate(ids[1:2], "copy moved") == ids[1:2]
    assert await store.restart(ids[2:3], "lease lost") == ids[2:3]
    assert await store.fail(ids[3], "Tape", error="bad block", error_code=30)
    rows = [await store.get(i) for i in ids]
    assert [(r.state, r.drive, r.volume, r.error) for r in rows] == [
        ("queued", None, "VOL1", "busy"), ("queued", None, None, None),
        ("queued", None, "VOL1", None), ("failed", "d1", "VOL1", "bad block"),
    ]  # fmt: skip
    assert [r.started_at is None for r in rows[:3]] == [False, False, True]
    assert (rows[3].error_code, rows[3].finished_at is not None) == (30, True)
    assert [(await history(store, i))[-1] for i in ids] == [
        (None, "queued", "transient backend error"), (None, "queued", "copy moved"),
        (None, "queued", "lease lost"), (None, "failed", "Tape"),
    ]  # fmt: skip
    assert await store.retry(ids[3:], "retried") == ids[3:]
    row = await store.get(ids[3])
    assert (row.state, row.error, row.error_code, row.finished_at, row.attempts) == (
        "queued", None, None, None, 0
    )  # fmt: skip
    assert await store.reject(ids[3:], "NoCopy", error="gone", error_code=2) == ids[3:]
    row = await store.get(ids[3])
    assert (row.state, row.error, row.error_code, row.finished_at is not None) == (
        "failed", "gone", 2, True
    )  # fmt: skip


async def test_withdraw_and_cancel_record_the_reason_as_the_error(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"), recall("0003"))
    await activate(store, ids[2:])
    assert await store.withdraw(ids, "endit flush withdrawn") == ids[:2]  # not the active one
    assert sorted(await store.cancel(ids, "request file withdrawn")) == ids[2:]
    rows = [await store.get(i) for i in ids]
    assert [(r.state, r.error) for r in rows] == [
        ("cancelled", "endit flush withdrawn"), ("cancelled", "endit flush withdrawn"),
        ("cancelled", "request file withdrawn"),
    ]  # fmt: skip
    assert all(r.finished_at is not None for r in rows)


async def test_abandon_keeps_the_finish_and_records_why(store: RequestStoreInterface) -> None:
    [rid] = await submit(store, recall(delivery="claim"))
    await end(store, [rid], State.DONE)
    finished = (await store.get(rid)).finished_at
    assert await store.abandon([rid], "unclaimed", error="part removed") == [rid]
    row = await store.get(rid)
    assert (row.state, row.error, row.finished_at) == ("abandoned", "part removed", finished)
    assert await store.abandon([rid], "unclaimed", error="again") == []


async def test_transitions_wake_waiters_listeners_and_the_scheduler(
    store: RequestStoreInterface,
) -> None:
    ids = await submit(store, recall("0001"), recall("0002"))
    heard: list[int] = []
    # Listeners are given at construction (tssd.app); the test adds one to the store made.
    store.notifier.listeners = (*store.notifier.listeners, heard.extend)
    event = store.notifier.watch(ids[0])
    await activate(store, ids)
    assert not event.is_set() and heard == []
    store.work.clear()
    store.work.take()
    await store.requeue([ids[1]], "session ended")
    assert store.work.is_set() and store.work.take() == Noted(everything=True)
    await store.finish(ids[0], "read")
    assert event.is_set() and heard == [ids[0]]
    store.notifier.unwatch(ids[0], event)


async def test_retry_keeps_one_open_request_per_key(store: RequestStoreInterface) -> None:
    [first] = await submit(store, recall())
    await store.cancel([first], "test")
    [second, other] = await submit(store, recall(), recall("0002"))
    await store.cancel([other], "test")
    with pytest.raises(Conflict):
        await store.retry([first, other], "retried")
    # Nothing moved: the change is all or nothing.
    assert [await state_of(store, i) for i in (first, second, other)] == [
        "cancelled", "queued", "cancelled"
    ]  # fmt: skip


async def test_finish_changes_an_active_request_only(store: RequestStoreInterface) -> None:
    [rid, cancelled] = await submit(store, recall("0001"), recall("0002"))
    assert not await store.finish(rid)  # queued, not active
    await activate(store, [rid, cancelled])
    await store.cancel_request(cancelled)
    assert not await store.finish(cancelled)
    assert await state_of(store, cancelled) == "cancelled"
    assert await store.finish(rid, "read", result_adler32="0000abcd")
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
    await store.finish(rid)
    assert store.polls.lookup("recall", "00AA") is None
    await submit(store, recall("0002"), recall("0003"))  # a batch is not indexed
    assert store.polls.lookup("recall", "0002") is None

"""The request store's contract (tssd/db/interface.py), one suite on every implementation.

Each test runs on SQLite, on PostgreSQL (skipped without a server, a failure under
``CI=true``) and on the in-memory store, so the memory store stays a faithful stand-in
for tests that use it instead of a database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from tssd.db.engine import create_engine, session_factory
from tssd.db.interface import (
    CandidateReads,
    QueueSettings,
    RequestStoreInterface,
    SchedulingClaims,
)
from tssd.db.memory import MemoryStore
from tssd.db.models import Base, QueueRow, RequestEvent
from tssd.db.store import ListFilter, RequestStore
from tssd.domain import State
from tssd.errors import Conflict, NotFound
from tssd.submit import SubmitSpec, parse_submit

OPEN = ("queued", "active")


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("memory", id="memory"),
    ]
)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RequestStoreInterface]:
    if request.param == "memory":
        yield MemoryStore()
        return
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield RequestStore(session_factory(engine), postgres=request.param == "postgres")
    finally:
        await engine.dispose()


# -- what the interface does not cover: set-up and inspection per implementation -----------


async def history(store: RequestStoreInterface, request_id: int) -> list[tuple[Any, ...]]:
    """(from_state, to_state, reason) of each event of *request_id*, oldest first."""
    if isinstance(store, MemoryStore):
        return [(e.from_state, e.to_state, e.reason) for e in store.events(request_id)]
    assert isinstance(store, RequestStore)
    stmt = (
        select(RequestEvent.from_state, RequestEvent.to_state, RequestEvent.reason)
        .where(RequestEvent.request_id == request_id)
        .order_by(RequestEvent.id)
    )
    async with store.sessions() as session:
        return [tuple(row) for row in (await session.execute(stmt)).all()]


async def set_queue(store: RequestStoreInterface, name: str, **values: Any) -> None:
    if isinstance(store, MemoryStore):
        store.set_queue(name, **values)
        return
    assert isinstance(store, RequestStore)
    async with store.sessions.begin() as session:
        await session.execute(insert(QueueRow).values(name=name, **values))


def recall(pnfsid: str = "00AA", path: str | None = None, **extra: Any) -> SubmitSpec:
    body = {"kind": "recall", "pnfsid": pnfsid, "path": path or f"/pool/{pnfsid}", **extra}
    return parse_submit(body)


def migrate(pnfsid: str = "00BB", **extra: Any) -> SubmitSpec:
    body = {"kind": "migrate", "pnfsid": pnfsid, "path": f"/pool/{pnfsid}", "size": 10,
            "storage_class": "atlas:raw", "checksum": "0000abcd", **extra}  # fmt: skip
    return parse_submit(body)


async def submit(store: RequestStoreInterface, *specs: SubmitSpec) -> list[int]:
    return [row.id for _, row in await store.submit(specs)]


async def activate(store: RequestStoreInterface, ids: Sequence[int], **values: Any) -> None:
    moved = await store.transition(ids, ("queued",), State.ACTIVE, values=values)
    assert moved == list(ids)


async def state_of(store: RequestStoreInterface, request_id: int) -> str:
    return (await store.get(request_id)).state


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
    assert store.notifier.work.is_set()
    assert "recall" in store.notifier.kinds


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
    store.notifier.work.clear()
    row = await store.retry(rid)
    assert (row.state, row.error, row.error_code, row.finished_at, row.attempts) == (
        "queued", None, None, None, 0
    )  # fmt: skip
    assert store.notifier.work.is_set()
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
    store.notifier.listeners.append(heard.extend)
    event = store.notifier.watch(ids[0])
    await store.transition(ids, OPEN, State.ACTIVE)
    assert not event.is_set() and heard == []
    store.notifier.work.clear()
    store.notifier.kinds.clear()
    await store.transition([ids[1]], ("active",), State.QUEUED)
    assert store.notifier.work.is_set() and "any" in store.notifier.kinds
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


# -- claims: the successors of claim(select), on every store that has them yet -----------------


@pytest.fixture
def claims(store: RequestStoreInterface) -> SchedulingClaims:
    scheduling = getattr(store, "scheduling", None)
    if scheduling is None:
        pytest.skip(f"{type(store).__name__} has no scheduling claims on this branch")
    return cast(SchedulingClaims, scheduling)


async def test_claim_recalls_takes_queued_recalls_of_a_volume_in_order(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    queued = [("a", 0), ("a", 5), ("b", 5), ("a", 5), ("c", 5), ("a", 5)]
    specs = [recall(f"000{i}", queue=q, priority=p) for i, (q, p) in enumerate(queued)]
    specs[5] = recall("0005", path="/full/fs/0005", queue="a", priority=5)
    ids = await submit(store, *specs)
    await store.set_locations({i: ("VOL001", 50 - 10 * n) for n, i in enumerate(ids)})
    await store.transition([ids[3]], OPEN, State.CANCELLED)
    store.instance = "me"
    claimed = await claims.claim_recalls(
        "VOL001", "d1", 10, queues=frozenset({"a", "c"}), paused=frozenset({"c"}),
        held=("/full/",), min_priority=5,
    )  # fmt: skip
    assert [r.id for r in claimed] == [ids[1]]
    assert (claimed[0].state, claimed[0].drive) == ("active", "d1")
    row = await store.get(ids[1])
    assert (row.state, row.drive, row.attempts, row.instance) == ("active", "d1", 1, "me")
    assert row.started_at is not None
    assert (await history(store, ids[1]))[-1] == ("queued", "active", "d1")
    # Left: ids[0] at 50, ids[2] at 30, ids[4] at 10, ids[5] at 0 (held no more).
    assert [r.id for r in await claims.claim_recalls("VOL001", "d1", 1, after=25)] == [ids[2]]
    by_id = await claims.claim_recalls("VOL001", "d2", 2, by_position=False)
    assert [r.id for r in by_id] == [ids[0], ids[4]]
    assert await claims.claim_recalls("VOL002", "d1", 10) == []
    assert await claims.claim_recalls("VOL001", "d1", 0) == []


async def test_claim_migrations_takes_the_highest_priority_first(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    ids = await submit(
        store, migrate("0001"), migrate("0002", priority=9), migrate("0003", queue="p"),
        migrate("0004", storage_class="cms:raw"), migrate("0005"),
    )  # fmt: skip
    claimed = await claims.claim_migrations("atlas:raw", "d1", 2, paused=frozenset({"p"}))
    assert [r.id for r in claimed] == [ids[1], ids[0]]
    assert [r.id for r in await claims.claim_migrations("atlas:raw", "d1", 5)] == [ids[2], ids[4]]
    assert (await history(store, ids[1]))[-1] == ("queued", "active", "d1")


async def test_claim_removals_and_ids_take_only_queued_requests(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    removals = [parse_submit({"kind": "remove", "bfid": f"B{i}"}) for i in range(3)]
    ids = await submit(store, *removals, recall("0001"), recall("0002"))
    await store.transition([ids[0]], OPEN, State.CANCELLED)
    claimed = await claims.claim_removals(1)
    assert [(r.id, r.state, r.drive) for r in claimed] == [(ids[1], "active", None)]
    assert await claims.claim_ids([ids[0], ids[1]]) == []  # cancelled, claimed already
    taken = await claims.claim_ids([ids[3], ids[4], 999_999], "d1")
    assert sorted(r.id for r in taken) == ids[3:]
    assert [await state_of(store, i) for i in ids] == [
        "cancelled", "active", "queued", "active", "active"
    ]  # fmt: skip


# -- the scheduler's reads and queue rows, on every store that has them yet -------------------


@pytest.fixture
def reads(store: RequestStoreInterface) -> CandidateReads:
    scheduling = getattr(store, "scheduling", None)
    if not hasattr(scheduling, "recall_volumes"):
        pytest.skip(f"{type(store).__name__} has no scheduling reads on this branch")
    return cast(CandidateReads, scheduling)


async def located(store: RequestStoreInterface, *rows: tuple[str, str | None, int]) -> list[int]:
    """Submit one recall per (pnfsid, volume, priority); positions follow the order."""
    specs = [recall(p, priority=prio) for p, _, prio in rows]
    ids = await submit(store, *specs)
    where = {i: (vol, n) for n, (i, (_, vol, _)) in enumerate(zip(ids, rows, strict=True)) if vol}
    await store.set_locations(where)
    return ids


async def test_recall_volumes_and_unlocated_read_the_queue(
    store: RequestStoreInterface, reads: CandidateReads
) -> None:
    ids = await located(
        store, ("0001", "VOL1", 0), ("0002", "VOL1", 5), ("0003", "VOL2", 1), ("0004", None, 0),
        ("0005", "VOL3", 9), ("0006", "VOL3", -3), ("0007", None, 0),
    )  # fmt: skip
    await activate(store, [ids[4]])
    held = await store.submit([recall("0008", path="/full/fs/0008")])
    await store.set_locations({held[0][1].id: ("VOL4", 0)})
    assert sorted(await reads.recall_volumes(frozenset(), ("/full/",))) == [
        ("VOL1", 5, ids[0]), ("VOL2", 1, ids[2]), ("VOL3", -3, ids[5])
    ]  # fmt: skip
    first = await reads.recall_volumes(frozenset({"default"}), (), first=2)
    assert first == []  # every recall is of the paused queue
    assert await reads.recall_volumes(frozenset(), (), first=2) == [
        ("VOL1", 0, ids[0]), ("VOL1", 5, ids[1])
    ]  # fmt: skip
    assert [r.id for r in await reads.unlocated(1)] == [ids[3]]
    assert [r.id for r in await reads.unlocated(10)] == [ids[3], ids[6]]
    await store.transition([ids[2]], OPEN, State.DONE)
    assert await reads.volumes_with_recalls(["VOL1", "VOL2", "VOL3", "VOL9"]) == {"VOL1", "VOL3"}
    pending = {row[:6] async for row in reads.pending_recalls()}
    assert pending == {
        (ids[0], "VOL1", 0, None, 0, "default"), (ids[1], "VOL1", 1, None, 5, "default"),
        (ids[5], "VOL3", 5, None, -3, "default"), (held[0][1].id, "VOL4", 0, None, 0, "default"),
    }  # fmt: skip


async def test_migration_reads_leave_out_paused_queues(
    store: RequestStoreInterface, reads: CandidateReads
) -> None:
    ids = await submit(
        store, migrate("0001"), migrate("0002", size=30), migrate("0003", queue="p"),
        migrate("0004", storage_class="cms:raw", checksum=None), migrate("0005"),
    )  # fmt: skip
    await store.transition([ids[4]], ("queued",), State.QUEUED, values={"attempts": 1})
    paused = frozenset({"p"})
    assert [r.id for r in await reads.unwritten_migrations(paused, 10)] == ids[:2]
    assert [r.id for r in await reads.unwritten_migrations(frozenset(), 2)] == ids[:2]
    groups = await reads.migration_groups(paused)
    assert sorted(g[:3] for g in groups) == [("atlas:raw", 3, 50), ("cms:raw", 1, 10)]
    assert all(g[3] is not None for g in groups)


async def test_queue_settings_list_rows_and_paused_names(store: RequestStoreInterface) -> None:
    settings = getattr(store, "queue_settings", None)
    if settings is None:
        pytest.skip(f"{type(store).__name__} has no queue_settings on this branch")
    queues = cast(QueueSettings, settings)
    assert await queues.paused() == frozenset()
    await set_queue(store, "atlas", priority=2, paused=True)
    await set_queue(store, "cms")
    assert sorted((q.name, q.priority, q.paused) for q in await queues.rows()) == [
        ("atlas", 2, True), ("cms", 0, False)
    ]  # fmt: skip
    assert await queues.paused() == frozenset({"atlas"})

"""The store contract's scheduler part: the gateway's reads and claims (issue 19).

``store.scheduling`` and ``store.queue_settings`` (tssd.ports.scheduling: SchedulingClaims,
CandidateReads, QueueSettings) on SQLite, PostgreSQL and the in-memory store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

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

from tssd.db.interface import (
    CandidateReads,
    QueueSettings,
    RequestStoreInterface,
    SchedulingClaims,
)
from tssd.domain import Kind, Request, State
from tssd.ports.scheduling import QueueRecord
from tssd.submit import parse_submit


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[RequestStoreInterface]:
    async with open_store(request) as opened:
        yield opened


@pytest.fixture
def claims(store: RequestStoreInterface) -> SchedulingClaims:
    return store.scheduling


async def test_claim_recalls_takes_queued_recalls_of_a_volume_in_order(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    queued = [("a", 0), ("a", 5), ("b", 5), ("a", 5), ("c", 5), ("a", 5)]
    specs = [recall(f"000{i}", queue=q, priority=p) for i, (q, p) in enumerate(queued)]
    specs[5] = recall("0005", path="/full/fs/0005", queue="a", priority=5)
    ids = await submit(store, *specs)
    await store.set_locations({i: ("VOL001", 50 - 10 * n) for n, i in enumerate(ids)})
    await end(store, [ids[3]], State.CANCELLED)
    store.instance = "me"
    claimed = await claims.claim_recalls(
        "VOL001", "d1", 10, queues=frozenset({"a", "c"}), paused=frozenset({"c"}),
        held=("/full/",), min_priority=5,
    )  # fmt: skip
    assert [r.id for r in claimed] == [ids[1]]
    assert (claimed[0].state, claimed[0].drive) == ("active", "d1")
    # A record, as every request the store hands out: the enums, not the column strings.
    assert type(claimed[0]) is Request
    assert (claimed[0].kind, claimed[0].state) == (Kind.RECALL, State.ACTIVE)
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


async def test_claim_removals_takes_the_oldest_queued_removals(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    removals = [parse_submit({"kind": "remove", "bfid": f"B{i}"}) for i in range(3)]
    ids = await submit(store, *removals, recall("0001"))
    await end(store, [ids[0]], State.CANCELLED)
    claimed = await claims.claim_removals(1)
    assert [(r.id, r.state, r.drive) for r in claimed] == [(ids[1], "active", None)]
    assert [r.id for r in await claims.claim_removals(10)] == [ids[2]]
    assert await state_of(store, ids[3]) == "queued"


async def test_claim_ids_takes_only_those_still_queued(
    store: RequestStoreInterface, claims: SchedulingClaims
) -> None:
    """A request cancelled (or claimed) between the caller's read and its claim is not
    returned as claimed, and gets no ``queued -> active`` event."""
    ids = await submit(store, recall("0001"), recall("0002"), recall("0003"), recall("0004"))
    await end(store, [ids[0]], State.CANCELLED)
    await activate(store, [ids[1]])
    assert await claims.claim_ids([ids[0], ids[1]]) == []
    assert await history(store, ids[0]) == [(None, "queued", "submitted"),
                                            (None, "cancelled", "test")]  # fmt: skip
    taken = await claims.claim_ids([ids[2], ids[3], 999_999], "d1")
    assert sorted(r.id for r in taken) == ids[2:]
    assert [await state_of(store, i) for i in ids] == ["cancelled", "active", "active", "active"]


# -- the scheduler's reads and queue settings ---------------------------------------------------


@pytest.fixture
def reads(store: RequestStoreInterface) -> CandidateReads:
    return store.scheduling


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
    assert all(type(r) is Request for r in await reads.unlocated(10))
    assert [r.id for r in await reads.unlocated(10)] == [ids[3], ids[6]]
    await end(store, [ids[2]], State.DONE)
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
    await activate(store, [ids[4]])
    await store.requeue([ids[4]], "session ended")  # queued again, attempts 1
    paused = frozenset({"p"})
    assert [r.id for r in await reads.unwritten_migrations(paused, 10)] == ids[:2]
    assert [r.id for r in await reads.unwritten_migrations(frozenset(), 2)] == ids[:2]
    groups = await reads.migration_groups(paused)
    assert sorted(g[:3] for g in groups) == [("atlas:raw", 3, 50), ("cms:raw", 1, 10)]
    assert all(g[3] is not None for g in groups)


async def test_queue_settings_list_rows_and_paused_names(store: RequestStoreInterface) -> None:
    queues: QueueSettings = store.queue_settings
    assert await queues.paused() == frozenset()
    await set_queue(store, "atlas", priority=2, paused=True, latency_target_s=60.0)
    await set_queue(store, "cms")
    # Domain records, never ORM rows, in name order.
    assert await queues.rows() == [
        QueueRecord("atlas", 2, None, True, 60.0), QueueRecord("cms", 0, None, False, None)
    ]  # fmt: skip
    assert await queues.paused() == frozenset({"atlas"})


async def test_the_scheduler_reads_and_claims_timezone_aware_times(
    store: RequestStoreInterface, reads: CandidateReads, claims: SchedulingClaims
) -> None:
    """The scheduler subtracts these from aware clocks as they come (no naive fix above
    the store): the planner's load, the migration groups' oldest, a claimed row."""
    ids = await located(store, ("0001", "VOL1", 0))
    await submit(store, migrate("0002"))
    [(*_, created)] = [row async for row in reads.pending_recalls()]
    [(*_, oldest)] = await reads.migration_groups(frozenset())
    [claimed] = await claims.claim_recalls("VOL1", "d1", 1)
    assert claimed.id == ids[0]
    stamps = (created, oldest, claimed.created_at, claimed.started_at)
    assert all(s is not None and s.utcoffset() is not None for s in stamps)

"""tss-hsm's one round trip on a real database: adopt-or-create, and the poll index."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tssd.db import schema
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import State
from tssd.db.polls import PollIndex
from tssd.db.store import RequestStore
from tssd.submit import SubmitSpec, parse_submit

PNFSID = "0000ABCDEF"


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[RequestStore]:
    engine = create_engine(db_url)
    try:
        await schema.upgrade(engine)
        yield RequestStore(session_factory(engine), postgres=engine.dialect.name != "sqlite")
    finally:
        await engine.dispose()


def recall(path: str = "/pool/data/0000ABCDEF") -> SubmitSpec:
    return parse_submit({"kind": "recall", "pnfsid": PNFSID, "path": path, "queue": "atlas"})


def indexed(store: RequestStore) -> dict[str, object] | None:
    entry = store.polls.lookup("recall", PNFSID)
    return None if entry is None else json.loads(entry.answer)["request"]


async def finish(store: RequestStore, request_id: int, state: State) -> None:
    await store.scheduling.claim_ids([request_id])
    ending = store.finish if state is State.DONE else store.fail
    assert await ending(request_id, "test")


async def test_obtain_creates_then_adopts_the_open_request(store: RequestStore) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    assert (first.created, first.row.state, first.row.queue) == (True, "queued", "atlas")
    assert indexed(store) == {"id": first.row.id, "kind": "recall", "state": "queued",
                              "pnfsid": PNFSID, "path": "/pool/data/0000ABCDEF",
                              "queue": "atlas"}  # fmt: skip
    # Another pool asks for the same file: the open request, whatever its path.
    again = await store.obtain(recall("/other/pool/0000ABCDEF"), adopt_finished=False)
    assert (again.created, again.row.id) == (False, first.row.id)
    await store.scheduling.claim_ids([first.row.id])
    assert indexed(store)["state"] == "active"  # type: ignore[index]


async def test_a_finished_request_is_adopted_once_for_its_path(store: RequestStore) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    await finish(store, first.row.id, State.DONE)
    assert indexed(store) is None  # finished: the next call reads the database
    other_path = await store.obtain(recall("/elsewhere/0000ABCDEF"), adopt_finished=True)
    assert other_path.created
    await finish(store, other_path.row.id, State.FAILED)
    collect = await store.obtain(recall("/elsewhere/0000ABCDEF"), adopt_finished=True)
    assert (collect.created, collect.row.id, collect.row.state) == (False, other_path.row.id,
                                                                    "failed")  # fmt: skip
    assert not collect.reported
    await store.mark_reported(other_path.row.id)
    # Reported: the next stage of the file is a new recall.
    later = await store.obtain(recall("/elsewhere/0000ABCDEF"), adopt_finished=True)
    assert later.created and later.row.id not in (first.row.id, other_path.row.id)


async def test_adopt_open_only_starts_a_new_recall(store: RequestStore) -> None:
    first = await store.obtain(recall(), adopt_finished=True)
    await finish(store, first.row.id, State.DONE)
    fresh = await store.obtain(recall(), adopt_finished=False)
    assert fresh.created and fresh.row.id != first.row.id


async def test_submit_and_obtain_share_the_open_request(store: RequestStore) -> None:
    [(created, row)] = await store.submit([recall()])
    assert created and indexed(store)["id"] == row.id  # type: ignore[index]
    found = await store.obtain(recall(), adopt_finished=True)
    assert (found.created, found.row.id) == (False, row.id)


def test_index_entries_expire_and_can_be_switched_off() -> None:
    class Row:
        id, kind, pnfsid, path, state, queue = 7, "recall", PNFSID, "/p", "queued", "q"

    index = PollIndex(ttl_s=600)
    index.seen([Row()])
    assert index.lookup("recall", PNFSID) is not None
    index.ttl_s = 1e-9
    assert index.lookup("recall", PNFSID) is None and len(index) == 0
    off = PollIndex(ttl_s=0)
    off.seen([Row()])
    assert off.lookup("recall", PNFSID) is None

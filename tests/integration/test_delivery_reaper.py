"""The reaper of unclaimed part files (tssd.delivery) on a real database.

Whoever removes the part file first wins: the reaper's unlink (the request ends
``abandoned``) or tss-hsm's rename (the request is claimed and stays ``done``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import update

from tssd.config import Settings
from tssd.config.sections import ApiSettings, DatabaseSettings
from tssd.db import schema
from tssd.db.engine import create_engine, session_factory
from tssd.db.lookups import SqlHistory
from tssd.db.models import Request, State
from tssd.db.store import RequestStore
from tssd.delivery import FileMovers, Reaper
from tssd.metrics import Metrics
from tssd.submit import parse_submit


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[RequestStore]:
    engine = create_engine(db_url)
    try:
        await schema.upgrade(engine)
        yield RequestStore(session_factory(engine), postgres=engine.dialect.name != "sqlite")
    finally:
        await engine.dispose()


async def done_recall(store: RequestStore, pool: Path, pnfsid: str) -> int:
    spec = parse_submit(
        {"kind": "recall", "pnfsid": pnfsid, "path": str(pool / pnfsid), "delivery": "claim"}
    )
    [(_, row)] = await store.submit([spec])
    await store.scheduling.claim_ids([row.id])
    assert await store.finish(row.id, "recalled", result_adler32="00000001", size=1)
    (pool / f".{pnfsid}.tssd-part").write_bytes(b"x")
    return row.id


async def test_unclaimed_part_files_are_removed_and_claimed_ones_kept(
    store: RequestStore, tmp_path: Path, db_url: str
) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    settings = Settings(
        home=str(tmp_path), database=DatabaseSettings(url=db_url),
        api=ApiSettings(pool_roots=str(pool)),
    )  # fmt: skip
    metrics = Metrics()
    history = SqlHistory(store.sessions)
    reaper = Reaper(store, history, FileMovers(settings, store), metrics, claim_timeout_s=0.0)
    unclaimed = await done_recall(store, pool, "00AA01")
    claimed = await done_recall(store, pool, "00AA02")
    renamed = await done_recall(store, pool, "00AA03")
    fresh = await done_recall(store, pool, "00AA04")
    # 00AA02: tss-hsm renamed it and reported; 00AA03: renamed, report not yet in.
    (pool / ".00AA02.tssd-part").rename(pool / "00AA02")
    await store.mark_reported(claimed)
    (pool / ".00AA03.tssd-part").rename(pool / "00AA03")
    async with store.sessions.begin() as session:  # 00AA04 finished just now
        await session.execute(update(Request).where(Request.id == fresh).values(finished_at=None))

    assert await reaper.sweep() == 1
    rows = {i: await store.get(i) for i in (unclaimed, claimed, renamed, fresh)}
    assert rows[unclaimed].state == State.ABANDONED
    assert "claimed" in (rows[unclaimed].error or "")
    assert [rows[i].state for i in (claimed, renamed, fresh)] == [State.DONE] * 3
    assert rows[renamed].delivery == "claimed"  # the reaper settled it: never looked at again
    assert sorted(p.name for p in pool.iterdir()) == [".00AA04.tssd-part", "00AA02", "00AA03"]
    assert metrics.registry.get_sample_value("tssd_recalls_abandoned_total") == 1
    assert await reaper.sweep() == 0  # nothing left in its index range but the fresh one

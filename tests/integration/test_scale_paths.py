"""What keeps a million pending requests cheap (issue 22): the shared counts, and the
decision-latency histogram measured inside the daemon."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, insert, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.app import build_services
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import ApiSettings, DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.db import counts as counts_module
from tssd.db.counts import Counts, Group, count_open
from tssd.db.models import Request, utcnow
from tssd.db.pages import ListFilter
from tssd.db.polls import PollIndex
from tssd.db.retention import purge
from tssd.db.sim_catalog import SimCatalogTables
from tssd.domain import Kind
from tssd.submit import parse_submit


async def _add(sessions: async_sessionmaker[Any], first: int, n: int) -> None:
    async with sessions.begin() as s:
        await s.execute(
            insert(Request),
            [
                {"kind": "recall", "state": "queued", "key": f"K{i}", "queue": "q", "size": 10}
                for i in range(first, first + n)
            ],
        )


def _bare(tmp_path: Path, url: str) -> Settings:
    """A daemon on *url* with no drive and no tape: the counts are what is looked at."""
    return Settings(home=str(tmp_path / "home"), database=DatabaseSettings(url=url),
                    sim=SimSettings(drives=0, tapes=0))  # fmt: skip


async def test_counts_are_exact_when_small_and_bounded_in_cost_when_large(
    tmp_path: Path, db_url: str
) -> None:
    async with build_services(_bare(tmp_path, db_url)) as services:
        sessions = services.store.sessions
        tally = Counts(sessions, max_age_s=0.0, exact_below=10)
        await _add(sessions, 0, 4)
        assert [(g.queue, g.state, g.count, g.bytes) for g in await tally.get()] == [
            ("q", "queued", 4, 40)
        ]
        await _add(sessions, 4, 2)
        assert tally.total == 4 and (await tally.get())[0].count == 6  # small: counted now
        await _add(sessions, 6, 10)
        assert (await tally.get())[0].count == 16
        await _add(sessions, 16, 1)
        # Large: the last count at once, a recount in the background, never two at a time.
        assert (await tally.get())[0].count == 16
        running = tally._running
        assert running is not None
        assert (await tally.get())[0].count == 16 and tally._running is running
        await running
        assert (await tally.get())[0].count == 17
        await tally.close()


async def test_the_first_count_is_shared_by_the_callers_that_arrive_together(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At start-up the status, the gauges and admission ask before any figure exists; on a
    # table of 10 M finished requests each count is a scan of seconds (seen: six at once).
    async with build_services(_bare(tmp_path, db_url)) as services:
        sessions = services.store.sessions
        await _add(sessions, 0, 12)
        tally = Counts(sessions, exact_below=10)
        counted = 0
        count = tally._count

        async def counting() -> list[Group]:
            nonlocal counted
            counted += 1
            return await count()

        monkeypatch.setattr(tally, "_count", counting)
        answers = await asyncio.gather(*(tally.get() for _ in range(6)))
        assert counted == 1
        assert all([(g.state, g.count) for g in a] == [("queued", 12)] for a in answers)
        small = Counts(sessions, exact_below=100)  # small: every caller still counts now
        monkeypatch.setattr(small, "_count", counting)
        await asyncio.gather(*(small.get() for _ in range(3)))
        assert counted == 1 + 1 + 3
        await tally.close()


async def test_a_large_table_recounts_its_history_less_often_than_its_queue(
    tmp_path: Path, db_url: str
) -> None:
    async with build_services(_bare(tmp_path, db_url)) as services:
        sessions = services.store.sessions
        tally = Counts(sessions, max_age_s=0.0, exact_below=10, finished_max_age_s=3600.0)
        await _add(sessions, 0, 16)
        async with sessions.begin() as s:
            await s.execute(update(Request).where(Request.id <= 4).values(state="done"))
        counted = {(g.state, g.count) for g in await tally.get()}  # the first: every state
        assert counted == {("queued", 12), ("done", 4)}
        async with sessions.begin() as s:
            await s.execute(update(Request).where(Request.id <= 6).values(state="done"))
        await tally._count()
        # The queue is recounted; the history stands until finished_max_age_s has passed.
        assert {(g.state, g.count) for g in tally.groups} == {("queued", 10), ("done", 4)}
        tally.finished_at = float("-inf")
        await tally._count()
        assert {(g.state, g.count) for g in tally.groups} == {("queued", 10), ("done", 6)}
        await tally.close()


@pytest.mark.postgres
async def test_the_open_counts_read_the_state_index_never_the_history(
    tmp_path: Path, pg_url: str
) -> None:
    # An analysed table whose tenth is open: the planner's own choice for the open
    # counts was a parallel scan of the whole table, history included (1.3-1.8 s at 11 M
    # rows on the front-door benchmark with autovacuum on; 1.2 s from the index).
    async with build_services(_bare(tmp_path, pg_url)) as services:
        sessions, engine = services.store.sessions, services.store.engine
        await _add(sessions, 0, 5000)
        async with sessions.begin() as s:
            await s.execute(update(Request).where(Request.id > 500).values(state="done"))
            await s.execute(text("ANALYZE requests"))
        sent: list[str] = []

        def capture(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
            sent.append(" ".join(statement.split()))

        event.listen(engine.sync_engine, "before_cursor_execute", capture)
        tally = Counts(sessions, exact_below=10)
        await tally.get()  # the first count: every state, the whole table by design
        sent.clear()
        assert await count_open(engine) == 500
        await tally._count()  # a recount of the open ones
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
        counts = [i for i, sql in enumerate(sent) if sql.startswith("SELECT")]
        assert len(counts) == 2
        assert all(sent[i - 1] == "SET LOCAL enable_seqscan = off" for i in counts)
        for stmt in (counts_module._OPEN_GROUPED, counts_module._OPEN):
            sql = stmt.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
            async with engine.connect() as conn:
                await conn.execute(text("SET LOCAL enable_seqscan = off"))
                plan = (await conn.execute(text(f"EXPLAIN {sql}"))).scalars().all()
            assert not any("Seq Scan" in line for line in plan), plan
        await tally.close()


CATALOG = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
    f"00AA{i:04d},VOL00{i % 2},{i // 2 + 1},1000,atlas:tape,2020-01-01T00:00:00+00:00\n"
    for i in range(6)
)


async def test_a_freed_drive_is_timed_to_the_next_decision(tmp_path: Path, db_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        api=ApiSettings(pool_roots=str(tmp_path)),  # the recalls land in tmp_path
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=1, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(tick_s=0.2, keep_mounted_s=0.0, fill_wait_s=0.0),
    )
    async with build_services(settings) as services:
        await import_csv(
            SimCatalogTables(services.store.sessions), io.StringIO(CATALOG), replace=True
        )
        await services.scheduler.start()
        specs = [parse_submit({"kind": "recall", "pnfsid": f"00AA{i:04d}",
                               "path": str(tmp_path / f"f{i}")}) for i in range(6)]  # fmt: skip
        rows = [row for _, row in await services.store.submit(specs)]
        histogram = services.metrics.schedule_decision_seconds
        runner = asyncio.create_task(services.scheduler.run())
        try:
            for _ in range(300):
                done = await services.store.query([r.id for r in rows])
                if done["counts"]["done"] == 6 and _observed(histogram)[0] >= 2:
                    break
                await asyncio.sleep(0.1)
        finally:
            await services.scheduler.stop(5.0)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await services.scheduler.shutdown_drives(60.0)
        count, total = _observed(histogram)
        # Two tapes on one drive: the drive freed at least twice, each time a pass decided.
        assert done["counts"]["done"] == 6
        assert count >= 2 and 0 <= total / count < 5.0


def _observed(histogram: Any) -> tuple[float, float]:
    samples = {s.name: s.value for m in histogram.collect() for s in m.samples}
    return samples["tssd_schedule_decision_seconds_count"], samples[
        "tssd_schedule_decision_seconds_sum"
    ]


async def test_sqlite_plans_neither_walk_nor_sort(tmp_path: Path) -> None:
    """SQLite has no statistics to go by: the hot statements must name an index that gives
    both the rows and their order (PostgreSQL: tests/integration/test_explain_plans.py)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'plans.db'}"
    settings = Settings(home=str(tmp_path / "home"), database=DatabaseSettings(url=url),
                        sim=SimSettings(drives=0, tapes=0))  # fmt: skip
    captured: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "requests" in sql and not many:
            captured.append((sql, params))

    async with build_services(settings) as services:
        store = services.store
        await _add(store.sessions, 0, 20)
        engine = store.engine.sync_engine
        event.listen(engine, "before_cursor_execute", capture)
        try:
            await services.scheduler.intake.locate_recalls(())
            await purge(services.retention, utcnow(), batch=10)
            for flt in (ListFilter(state="queued"), ListFilter(state="queued", kind="recall"),
                        ListFilter(queue="q"), ListFilter(queue="q", state="failed")):  # fmt: skip
                await store.list_requests(flt)
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        async with store.engine.connect() as conn:
            for sql, params in captured:
                if "GROUP BY" in sql:
                    continue
                plan = (await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)).all()
                details = " | ".join(row[3] for row in plan)
                assert "SCAN requests" not in details, (sql, details)
                assert "TEMP B-TREE" not in details, (sql, details)


async def test_passes_for_new_requests_are_batched_but_a_freed_drive_is_not_held(
    tmp_path: Path, db_url: str
) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=1, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(tick_s=300.0, submit_batch_s=300.0),
    )
    async with build_services(settings) as services:
        scheduler = services.scheduler
        work = scheduler.work
        await scheduler.start()
        passes: list[bool] = []

        async def counted(*, full: bool = True) -> None:
            passes.append(full)

        scheduler.schedule_once = counted  # type: ignore[method-assign]
        runner = asyncio.create_task(scheduler.run())
        try:
            await _until(lambda: len(passes) == 1)  # the first, full pass
            for _ in range(50):  # requests keep arriving, as from a busy pool
                work.submitted((Kind.RECALL,))
                await asyncio.sleep(0.01)
            assert passes == [True]  # they wait for the batch, not a pass each
            scheduler.decisions.freed.append(0.0)  # a drive freed: decided at once
            scheduler._drive_freed.set()
            await _until(lambda: len(passes) == 2)
            assert passes == [True, False]
        finally:
            await scheduler.stop(1.0)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)


async def _until(done: Any, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


def test_batch_submissions_do_not_fill_the_poll_index() -> None:
    class Row:
        def __init__(self, rid: int, state: str) -> None:
            self.id, self.kind, self.pnfsid, self.path = rid, "recall", f"{rid:08X}", "/p"
            self.state, self.queue = state, "q"

    index = PollIndex()
    index.seen([Row(1, "queued"), Row(2, "queued")], add=False)
    assert len(index) == 0  # a batch: nobody polls it yet
    index.seen([Row(1, "queued")])
    index.seen([Row(1, "active"), Row(2, "active")], add=False)
    entry = index.lookup("recall", "00000001")
    assert entry is not None and entry.state == "active" and len(index) == 1
    index.seen([Row(1, "done")], add=False)
    assert len(index) == 0  # finished: dropped whatever *add* says

"""Intake while reading: drives keep claiming while recalls stream in faster than they are
located (issue 45: on a busy PostgreSQL no drive started during a bulk intake)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tssd.app import build_services
from tssd.backends.base import TapeBackend, TapeCopy
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import ApiSettings, DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.db.sim_catalog import SimCatalogTables
from tssd.domain import Kind
from tssd.submit import parse_submit

BULK = 20
BULKS = 400  # at most: the submitter stops once a drive has claimed
TAPES = 4


class SlowLocate:
    """The scheduler's backend with each locate a round trip slower: a locate pass of
    ``BULK`` recalls then takes longer than a bulk submit, as on a loaded PostgreSQL
    (docs/research/benchmarks-log.md, "A fresh install through the front doors")."""

    def __init__(self, backend: TapeBackend) -> None:
        self._backend = backend

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        await asyncio.sleep(0.05)
        return await self._backend.locate(pnfsids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def _catalog(n: int) -> str:
    return "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
        f"00AB{i:06d},VOL{i % TAPES:03d},{i // TAPES + 1},1000,atlas:tape,"
        "2020-01-01T00:00:00+00:00\n"
        for i in range(n)
    )


async def test_drives_claim_while_bulks_of_recalls_stream_in(tmp_path: Path, db_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        api=ApiSettings(pool_roots=str(tmp_path)),
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=2, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(tick_s=0.5, keep_mounted_s=0.0, fill_wait_s=0.0),
    )
    async with build_services(settings) as services:
        store, scheduler = services.store, services.scheduler
        await import_csv(
            SimCatalogTables(store.sessions), io.StringIO(_catalog(BULK * BULKS)), replace=True
        )
        await scheduler.start()
        intake = scheduler.intake
        intake.backend = SlowLocate(intake.backend)  # type: ignore[assignment]
        intake.batch = intake.locate_limit = BULK
        scheduler.locate_pass_s = 0.2
        runner = asyncio.create_task(scheduler.run())
        ids: list[int] = []
        try:
            for bulk in range(BULKS):
                if scheduler.sessions_started[Kind.RECALL]:
                    break
                specs = [
                    parse_submit({"kind": "recall", "pnfsid": f"00AB{i:06d}",
                                  "path": str(tmp_path / f"f{i}")})
                    for i in range(bulk * BULK, (bulk + 1) * BULK)
                ]  # fmt: skip
                ids += [row.id for _, row in await store.submit(specs)]
                await asyncio.sleep(0)
            claimed_while_submitting = bool(scheduler.sessions_started[Kind.RECALL])
            for _ in range(600):
                counts = (await store.query(ids))["counts"]
                if counts["done"] == len(ids):
                    break
                await asyncio.sleep(0.1)
        finally:
            await scheduler.stop(5.0)
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await scheduler.shutdown_drives(60.0)
        assert claimed_while_submitting, f"no session started during {len(ids)} submits"
        assert len(ids) < BULK * BULKS
        assert counts["done"] == len(ids)

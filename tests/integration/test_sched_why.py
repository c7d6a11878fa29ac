"""``GET /v1/requests/{id}/why``: the rule a queued recall waits on, and its ETA."""

from __future__ import annotations

import io
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.db.models import QueueRow
from tssd.db.sim_catalog import SimCatalogTables
from tssd.submit import parse_submit

CATALOG = (
    "pnfsid,volume,seq,size,storage_class,written_at\n"
    "00AA0001,VOL001,1,1000000,atlas:tape,2020-01-01T00:00:00+00:00\n"
    "00AA0002,VOL001,2,1000000,atlas:tape,2020-01-01T00:00:01+00:00\n"
)


async def test_why_names_the_rule_and_an_eta(tmp_path: Path, db_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=1, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(fill_wait_s=600.0, tick_s=0.1),
    )
    async with build_services(settings) as services:
        sessions: async_sessionmaker[AsyncSession] = services.store.sessions
        await import_csv(SimCatalogTables(sessions), io.StringIO(CATALOG), replace=True)
        await services.scheduler.start()
        spec = parse_submit({"kind": "recall", "pnfsid": "00AA0001", "path": "/tmp/x"})
        [(_, row)] = await services.store.submit([spec])
        await services.scheduler.schedule_once()
        async with TestClient(TestServer(make_app(services))) as client:
            why = await (await client.get(f"/v1/requests/{row.id}/why")).json()
            assert why["id"] == row.id and why["state"] == "queued"
            assert why["rule"] == "fill_wait"
            assert 0 < why["eta_s"] <= 600 and why["eta"]
            body = await (await client.get(f"/v1/requests/{row.id}")).json()
            assert abs(body["request"]["eta_s"] - why["eta_s"]) < 30
            async with sessions.begin() as session:
                session.add(QueueRow(name="default", priority=0, paused=True))
            await services.scheduler.schedule_once(full=True)
            why = await (await client.get(f"/v1/requests/{row.id}/why")).json()
            assert why["rule"] == "queue_paused" and why["eta_s"] is None
            missing = await client.get("/v1/requests/999999/why")
            assert missing.status == 404

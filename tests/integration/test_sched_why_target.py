"""``why`` against a queue's latency target, through the daemon's own components: the
``[[queues]]`` settings seed the queues table at start and the answer carries the target,
the deadline and the ETA against it."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.backends.sim.catalog_csv import import_csv
from tssd.config import DatabaseSettings, SchedulerSettings, Settings, SimSettings
from tssd.config.queues import load_queues
from tssd.db.sim_catalog import SimCatalogTables
from tssd.submit import parse_submit

CATALOG = (
    "pnfsid,volume,seq,size,storage_class,written_at\n"
    "00AA0001,VOL001,1,1000000,atlas:tape,2020-01-01T00:00:00+00:00\n"
)


async def test_why_gives_the_eta_against_the_queue_target(tmp_path: Path, db_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=1, tapes=0, time_scale=0.0),
        scheduler=SchedulerSettings(fill_wait_s=600.0, tick_s=0.1),
        queues=load_queues([{"name": "atlas", "latency_target_s": "1h", "priority": 2}]),
    )
    async with build_services(settings) as services:
        await import_csv(
            SimCatalogTables(services.store.sessions), io.StringIO(CATALOG), replace=True
        )
        await services.scheduler.start()
        spec = parse_submit(
            {"kind": "recall", "pnfsid": "00AA0001", "path": "/tmp/x", "queue": "atlas"}
        )
        [(_, row)] = await services.store.submit([spec])
        await services.scheduler.schedule_once(full=True)
        async with TestClient(TestServer(make_app(services))) as client:
            queues = (await (await client.get("/v1/queues")).json())["queues"]
            atlas = next(q for q in queues if q["name"] == "atlas")
            assert (atlas["priority"], atlas["latency_target_s"]) == (2, 3600.0)
            why = await (await client.get(f"/v1/requests/{row.id}/why")).json()
            assert (why["queue"], why["target_s"]) == ("atlas", 3600.0)
            arrived = datetime.fromisoformat(why["deadline"]).timestamp() - 3600.0
            created = row.created_at
            created = created if created.tzinfo else created.replace(tzinfo=UTC)
            assert abs(arrived - created.timestamp()) < 5
            if why["eta_s"] is not None:  # on a slow machine the tape may be mounting
                assert why["on_target"] is True and 0 < why["slack_s"] <= 3600.0

"""``tssd_requests_total`` counts every way a request ends: intake's failures (a recall of
a file with no copy on tape) and cancels never reached it, so the Grafana "Errors" panel
(deploy/grafana/tssd-dashboard.json) stayed empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.config import ApiSettings, DatabaseSettings, Settings, SimSettings

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "tssd-dashboard.json"


def ended(exposition: str) -> dict[tuple[str, str, str], float]:
    """(kind, queue, outcome) -> count of tssd_requests_total."""
    return {
        (s.labels["kind"], s.labels["queue"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if s.name == "tssd_requests_total"
    }


def errors_panel_selector() -> tuple[str, dict[str, str], list[str]]:
    """The metric of the Errors panel's requests query, its label matchers, and its
    ``by`` labels."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    [expr] = [t["expr"] for p in panels if p.get("title") == "Errors" for t in p["targets"]
              if "tssd_requests" in t["expr"]]  # fmt: skip
    by = re.search(r"by \(([^)]*)\)", expr)
    selector = re.search(r"(\w+)\{([^}]*)\}", expr)
    assert by is not None and selector is not None, expr
    matchers = dict(re.findall(r'(\w+)="([^"]*)"', selector.group(2)))
    return selector.group(1), matchers, [x.strip() for x in by.group(1).split(",")]


async def test_failed_and_cancelled_requests_are_counted(tmp_path: Path, db_url: str) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=db_url),
        sim=SimSettings(drives=0, tapes=0),
        api=ApiSettings(pool_roots="/"),
    )
    async with (
        build_services(settings) as svc,
        TestClient(TestServer(make_app(svc))) as client,
    ):
        # No copy on tape: intake fails it, no drive involved.
        body = {"kind": "recall", "pnfsid": "00AA0001", "path": str(tmp_path / "a")}
        failing = (await (await client.post("/v1/requests", json=body)).json())["request"]
        body = {"kind": "recall", "pnfsid": "00AA0002", "path": str(tmp_path / "b"),
                "queue": "cms"}  # fmt: skip
        cancelled = (await (await client.post("/v1/requests", json=body)).json())["request"]
        assert (await client.post(f"/v1/requests/{cancelled['id']}/cancel", json={})).status == 200
        await svc.scheduler.schedule_once(full=True)
        state = (await (await client.get(f"/v1/requests/{failing['id']}")).json())["request"]
        assert state["state"] == "failed"
        exposition = await (await client.get("/metrics")).text()
    counts = ended(exposition)
    assert counts == {
        ("recall", "default", "failed"): 1.0,
        ("recall", "cms", "cancelled"): 1.0,
    }
    # The dashboard's Errors panel selects what tssd exports.
    metric, matchers, by = errors_panel_selector()
    assert metric == "tssd_requests_total"
    matchers.pop("instance", None)  # Prometheus's target label, not tssd's
    samples = [s for f in text_string_to_metric_families(exposition) for s in f.samples]
    selected = [
        s
        for s in samples
        if s.name == metric and all(s.labels.get(k) == v for k, v in matchers.items())
    ]
    assert [s.labels["queue"] for s in selected] == ["default"]
    assert all(label in selected[0].labels for label in by)

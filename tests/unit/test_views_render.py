"""The at-a-glance views without a daemon: recent activity windows, the /status HTML and
the ``tssctl top`` screen (issue 21)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from rich.console import Console

from tssd.activity import DEPTH_MAX, LATENCY_MAX, QUEUES_MAX, Activity, depth_of, percentile
from tssd.api.openapi import openapi_document
from tssd.api.server import add_routes
from tssd.api.status_html import Page, efficiency_colour, render
from tssd.api.top import queue_etas
from tssd.cli.top import BAR, bar, count, screen, size
from tssd.db.models import Mount
from tssd.ports.reports import wear
from tssd.scheduler.choose import Running
from tssd.scheduler.cost import Verdict
from tssd.scheduler.planner import Entry, Planner

HOSTILE = '<script>alert("x")</script>&'


# -- activity -------------------------------------------------------------------------------


def test_rate_counts_the_window_only() -> None:
    a = Activity()
    a.moved("d0", 30_000_000, now=100.0)
    a.moved("d0", 30_000_000, now=125.0)
    assert a.rate("d0", now=126.0) == pytest.approx(2_000_000)
    # 31 s later the first transfer has left the 30 s window.
    assert a.rate("d0", now=131.0) == pytest.approx(1_000_000)
    # A mount 5 s old is measured over its 5 s, not over the whole window.
    assert a.rate("d0", now=131.0, since=126.0) == pytest.approx(6_000_000)
    assert a.rate("unknown", now=131.0) == 0.0


def test_p95_of_the_last_hour_nearest_rank() -> None:
    a = Activity()
    for i in range(1, 101):
        a.finished("atlas", float(i), now=float(i))
    assert a.p95("atlas", now=100.0) == (95.0, 100)
    # An hour later the first 50 have aged out.
    assert a.p95("atlas", now=3650.5) == (98.0, 50)
    assert a.p95("cms", now=0.0) == (None, 0)
    assert a.served(now=3650.5) == ["atlas"]
    assert a.served(now=7200.0) == []
    assert percentile([], 0.95) is None


def test_windows_are_bounded() -> None:
    a = Activity()
    for _ in range(LATENCY_MAX + 10):
        a.finished("q", 1.0, now=0.0)
    assert a.p95("q", now=0.0)[1] == LATENCY_MAX
    for i in range(QUEUES_MAX + 10):
        a.finished(f"queue{i}", 1.0, now=0.0)
    assert sum(a.p95(f"queue{i}", 0.0)[1] for i in range(QUEUES_MAX + 10)) == QUEUES_MAX - 1
    a.sample_every(1.0)
    for t in range(DEPTH_MAX + 100):
        a.sample(float(t), [("q", t, 0)])
    assert len(a.depth) == DEPTH_MAX


def test_depth_keeps_a_day_and_the_deepest_queues() -> None:
    a = Activity(depth_every_s=60.0)
    assert a.depth.maxlen == 1441
    counts = [("recall", "atlas", "queued", 5), ("recall", "atlas", "active", 2),
              ("migrate", "atlas", "queued", 1), ("recall", "cms", "queued", 9),
              ("recall", "lhcb", "done", 100)]  # fmt: skip
    rows = depth_of(counts)
    assert rows == [("atlas", 6, 2), ("cms", 9, 0)]
    first = a.sample(0.0, rows)
    assert (first.queued, first.active, first.queues) == (15, 2, (("cms", 9), ("atlas", 6)))
    a.sample(86400.0 + 1, rows)
    assert [s.at for s in a.depth] == [86401.0]


# -- /status HTML ---------------------------------------------------------------------------


def page(**kw: Any) -> Page:
    now = 1_800_000_000.0
    mounts = [
        {"id": 1, "drive": "drive0", "volume": "A00001", "purpose": "recall", "start": now - 7200,
         "end": now - 3600, "files": 10, "bytes": 10**9, "efficiency": 0.8},
        {"id": 2, "drive": HOSTILE, "volume": HOSTILE, "purpose": "recall", "start": now - 600,
         "end": None, "files": 1, "bytes": 5, "efficiency": 0.1},
        # Begun more than a day ago: drawn from the left edge.
        {"id": 3, "drive": "drive0", "volume": "A00002", "purpose": "migrate",
         "start": now - 90000, "end": now - 80000, "files": 0, "bytes": 0, "efficiency": None},
    ]  # fmt: skip
    drives = [{"name": "drive0", "state": "busy", "volume": "A00001", "purpose": "recall",
               "mounted_s": 75.0, "files_done": 3, "mb_s": 301.2}]  # fmt: skip
    values = dict(now=now, title="tssd on host", drives=drives, mounts=mounts, depth=[],
                  wear=[("A00001", 4), (HOSTILE, 2)])  # fmt: skip
    return Page(**(values | kw))


def test_status_page_escapes_and_draws_one_bar_per_mount() -> None:
    a = Activity()
    a.sample(1_800_000_000.0 - 60, [("atlas", 3, 1), (HOSTILE, 2, 0)])
    text = render(page(depth=a.depth))
    assert "<script" not in text and "alert(&quot;x&quot;)" in text
    assert re.findall(r'data-mount-id="(\d+)"', text) == ["1", "2", "3"]
    assert '<meta http-equiv="refresh" content="30">' in text
    assert "1 sample, one every 60 s, since 2027-01-15 07:59 UTC" in text
    assert len(re.findall(r"<svg ", text)) == 4  # timeline, legend, depth, wear
    # Nothing is fetched from anywhere: no script, no external URL but the SVG namespace.
    urls = set(re.findall(r"(?:src|href)=\"([^\"]*)\"", text))
    assert urls == {"data:,"}
    assert "hsl(96,70%,45%)" in text  # efficiency 0.8
    bars = re.findall(r'<rect class="mount"[^>]* x="([\d.]+)"[^>]* width="([\d.]+)"', text)
    assert all(float(x) >= 130 and float(x) + float(w) <= 951.5 for x, w in bars)


def test_status_page_without_data_says_so() -> None:
    text = render(page(drives=[], mounts=[], wear=[]))
    assert "no drives" in text and "no mounts today" in text and "no samples yet" in text


def test_efficiency_colour_runs_red_to_green() -> None:
    assert efficiency_colour(0.0) == "hsl(0,70%,45%)"
    assert efficiency_colour(1.5) == "hsl(120,70%,45%)"
    assert efficiency_colour(None) == "#999999"


# -- tssctl top screen ----------------------------------------------------------------------


def top_data(instances: tuple[str | None, ...] = (None, None)) -> dict[str, Any]:
    drives = [
        {"name": f"drive{i}-with-a-long-name", "instance": inst, "state": "busy",
         "volume": "VOL12345", "purpose": "recall", "mounted_s": 4000.0, "files_done": 123,
         "files_planned": 4567, "bytes_done": 12 * 10**12, "bytes_planned": 99 * 10**12,
         "mb_s": 1234.5}
        for i, inst in enumerate(instances)
    ] + [{"name": "idle", "instance": None, "state": "empty", "volume": None, "purpose": None,
          "mounted_s": None, "files_done": 0, "files_planned": 0, "bytes_done": 0,
          "bytes_planned": 0, "mb_s": 0.0}]  # fmt: skip
    queues = [
        {"name": "atlas-very-long-queue-name", "paused": True, "queued": 123456, "active": 99,
         "oldest_wait_s": 200000.0, "p95_1h_s": 7300.0, "done_1h": 4, "latency_target_s": 3600,
         "eta_s": 90000.0},
        {"name": "default", "paused": False, "queued": 0, "active": 0, "oldest_wait_s": None,
         "p95_1h_s": None, "done_1h": 0, "eta_s": None},
    ]  # fmt: skip
    mounts = [{"drive": "drive0", "volume": "VOL12345", "purpose": "recall", "open": False,
               "requested_at": "2026-01-01T10:00:00+00:00", "session_s": 3000.0, "files": 40,
               "bytes": 10**11, "efficiency": 0.4}]  # fmt: skip
    totals = {"drives": 3, "drives_busy": 2, "queued": 123456, "active": 99, "done_1h": 4000,
              "mb_s": 2469.0, "mb_s_last_minute": 2400.0}  # fmt: skip
    return {"at": "2026-01-01T10:00:00+00:00", "instance": None, "drives": drives,
            "queues": queues, "mounts": mounts, "totals": totals}  # fmt: skip


@pytest.mark.parametrize("instances", [(None, None), ("host-a", "host-b")])
@pytest.mark.parametrize("plain", [False, True])
def test_top_fits_100_columns(instances: tuple[str | None, ...], plain: bool) -> None:
    console = Console(width=100, record=True, color_system=None)
    console.print(screen(top_data(instances), interval=1.5, plain=plain))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    # One line per drive and per queue, each whole on its line.
    assert sum("VOL12345" in line and "recall" in line for line in lines) == 2 + 1
    assert any(line.startswith("idle ") for line in lines)
    assert any("atlas-very" in line and "123456" in line and "paused" in line for line in lines)
    assert any(line.startswith("default ") for line in lines)
    assert "over target" in text  # p95 2h 1m against a 1 h target
    assert ("host-a" in text) == (instances[0] is not None)
    assert "2/3 drives busy" in lines[-1] and "2469 MB/s now" in lines[-1]


def test_bar() -> None:
    assert bar(1, 4, plain=True) == "##" + "." * (BAR - 2) + "  25%"
    assert bar(0, 0, plain=True) == "." * BAR + "    -"
    assert bar(5, 4).startswith("\u2588" * BAR)


def test_compact_figures() -> None:
    assert [count(n) for n in (999, 1234, 12_345, 1_234_567)] == ["999", "1.2k", "12k", "1.2M"]
    assert [size(n) for n in (512, 1_200_000_000, 180_000_000, 99 * 10**12)] == [
        "512B", "1.2G", "180M", "99T"
    ]  # fmt: skip


# -- queue ETA ------------------------------------------------------------------------------


def test_queue_eta_is_the_end_of_its_last_tape() -> None:
    planner = Planner()
    entry = {"size": 1, "priority": 0, "arrived": 0.0}
    planner.add([
        Entry(1, "T1", 1, queue="atlas", **entry),  # in line: start 100 + 50 s of service
        Entry(2, "T2", 1, queue="atlas", **entry),  # being read until 30
        Entry(3, "T2", 2, queue="cms", **entry),
        Entry(4, "T3", 1, queue="lhcb", **entry),  # held by a rule: no estimate
    ])  # fmt: skip

    def verdict(volume: str, rule: str = "") -> Verdict:
        return Verdict(volume, rule, 0, 50.0, 10.0, (), frozenset(), "atlas")

    chooser = SimpleNamespace(
        running={"drive0": Running("T2", "cms", 0, until=30.0)},
        verdicts={"T1": verdict("T1"), "T3": verdict("T3", "mount_budget")},
        starts={"T1": 100.0},
    )
    scheduler: Any = SimpleNamespace(chooser=chooser, planner=planner)
    assert queue_etas(scheduler, now=10.0) == {"atlas": 140.0, "cms": 20.0, "lhcb": None}
    scheduler.planner = None
    assert queue_etas(scheduler, now=10.0) == {}


def test_wear_counts_the_mounts_since_midnight() -> None:
    day = datetime(2026, 1, 2, tzinfo=UTC)
    mounts = [Mount(volume=v, requested_at=day + timedelta(hours=h))
              for v, h in (("A", -1), ("B", 1), ("A", 2), ("A", 3), ("C", 4))]  # fmt: skip
    mounts.append(Mount(volume="C", requested_at=datetime(2026, 1, 2, 5, tzinfo=UTC)))
    assert wear(mounts, day, 2) == [("A", 2), ("C", 2)]


def test_every_route_is_in_the_openapi_document() -> None:
    app = web.Application()
    add_routes(app)
    routes = {(r.method.lower(), r.resource.canonical) for r in app.router.routes()
              if r.method != "HEAD" and r.resource is not None}  # fmt: skip
    documented = {(m, p) for p, ops in openapi_document()["paths"].items() for m in ops}
    assert routes - {("get", "/openapi.json")} == documented
    assert {("get", "/v1/top"), ("get", "/status")} <= documented

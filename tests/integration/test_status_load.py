"""Readers of ``/status`` on the open metrics listener are nobody's pools: 16 of them in a
loop, each page rendered on the event loop, made admission control refuse 7 of 30 pool
puts. The page is rendered at most once per ``api.status_cache_s``, in a worker thread,
and its readers share that render."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tssd.api import status_page
from tssd.api.admission import Admission
from tssd.api.server import make_app
from tssd.api.status_html import Page
from tssd.app import build_services
from tssd.config import ApiSettings, DatabaseSettings, Settings, SimSettings
from tssd.config.sections import LimitsSettings

READERS = 16
PUTS = 30


async def test_status_readers_share_one_render_and_no_submit_is_refused(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders = 0
    real = status_page.render

    def costly_render(page: Page) -> str:
        # A page of a large library: a few tenths of a second of interpreter work.
        nonlocal renders
        renders += 1
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass
        return real(page)

    monkeypatch.setattr(status_page, "render", costly_render)
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=sqlite_url),
        sim=SimSettings(drives=0, tapes=0),
        api=ApiSettings(pool_roots="/"),
        limits=LimitsSettings(max_loop_lag_s=0.1),
    )
    async with build_services(settings) as svc:
        admission = Admission(settings.limits, svc.store)
        await admission.start()
        probes = TestClient(TestServer(make_app(svc, probes_only=True)))
        pools = TestClient(TestServer(make_app(svc, admission=admission)))
        async with probes, pools:
            # The readers are other processes in the attack: here threads, so that their
            # own work is not the daemon's event loop's.
            done = threading.Event()
            pages: list[str] = []

            def reader() -> None:
                while not done.is_set():
                    url = f"http://{probes.host}:{probes.port}/status"
                    with urllib.request.urlopen(url, timeout=60) as answer:
                        assert answer.status == 200
                        pages.append(answer.read().decode())

            readers = [threading.Thread(target=reader) for _ in range(READERS)]
            for thread in readers:
                thread.start()
            statuses = []
            try:
                for n in range(PUTS):
                    body = {"kind": "recall", "pnfsid": f"00AA{n:04d}", "path": f"/p/f{n}"}
                    statuses.append((await pools.post("/v1/requests", json=body)).status)
                    await asyncio.sleep(0.05)  # the lag monitor ticks between
            finally:
                done.set()
                for thread in readers:
                    await asyncio.to_thread(thread.join)
                await admission.stop()
        assert statuses == [201] * PUTS, f"{admission.refused} submits refused"
        assert admission.refused == 0
        assert len(pages) >= READERS and all("<svg" in p for p in pages)
        assert renders == 1, "one render serves every reader within api.status_cache_s"


async def test_the_page_is_rendered_again_once_it_is_older_than_the_setting(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders = 0
    real = status_page.render

    def counted(page: Page) -> str:
        nonlocal renders
        renders += 1
        return real(page)

    monkeypatch.setattr(status_page, "render", counted)
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=sqlite_url),
        sim=SimSettings(drives=0, tapes=0),
        api=ApiSettings(status_cache_s=0.0),
    )
    async with (
        build_services(settings) as svc,
        TestClient(TestServer(make_app(svc, probes_only=True))) as probes,
    ):
        together = await asyncio.gather(*(probes.get("/status") for _ in range(8)))
        assert [a.status for a in together] == [200] * 8
        shared = renders
        assert (await probes.get("/status")).status == 200
    assert shared < 8, "concurrent readers share a render in progress"
    assert renders == shared + 1, "with api.status_cache_s = 0 a later reader renders anew"

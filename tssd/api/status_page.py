"""``GET /status``: the read-only status page, on the metrics listener (docs/operations.md).

Server-rendered (:mod:`tssd.api.status_html`): it works on an air-gapped tape server, in
a browser with scripts off, and exposes nothing the metrics listener did not (it binds
127.0.0.1 by default). A render costs a bounded amount of work (at most
:data:`MOUNTS_MAX` mounts, :data:`WEAR_MAX` tapes, one row per drive), and there is at
most one per ``api.status_cache_s`` whatever the number of readers (:class:`PageCache`):
16 unauthenticated readers in a loop, each rendering on the event loop, made admission
control refuse 7 of 30 pool puts.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from aiohttp import web

from tssd.api.helpers import services
from tssd.api.status_html import Page, render
from tssd.api.top import drive_lines
from tssd.clock import utcnow
from tssd.domain import Mount
from tssd.ports.reports import mount_json, wear

#: Most mounts drawn on the timeline (the newest of the last 24 hours).
MOUNTS_MAX = 5000
#: Tapes listed under wear.
WEAR_MAX = 10
#: Nothing on the page is fetched or run: styles are inline, the icon is empty.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"


async def build_page(request: web.Request) -> Page:
    svc = services(request)
    glance = svc.glance
    now = utcnow()
    drives = await drive_lines(svc, glance)
    rows, truncated = await glance.mounts_since(now - timedelta(days=1), MOUNTS_MAX)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    worn = wear(rows, midnight, WEAR_MAX)
    instance = svc.cluster.instance if svc.cluster else None
    title = f"tssd on {socket.gethostname()}" + (f" ({instance})" if instance else "")
    notes = [f"only the newest {MOUNTS_MAX} mounts of the last 24 hours are drawn and "
             "counted for wear"] * truncated  # fmt: skip
    return Page(
        now=now.timestamp(),
        title=title,
        drives=drives,
        mounts=[timeline_entry(m, now.timestamp()) for m in rows],
        depth=list(svc.drives.activity.depth),
        depth_every_s=svc.drives.activity.depth_every_s,
        wear=worn,
        notes=notes,
    )


def timeline_entry(row: Mount, now: float) -> dict[str, Any]:
    entry = mount_json(row)
    start = (row.requested_at or utcnow()).timestamp()
    end = row.dismounted_at
    efficiency = entry["efficiency"]
    if end is None and now > start:  # still mounted: its efficiency so far
        efficiency = min(1.0, row.transfer_s / (now - start))
    return entry | {
        "start": start,
        "end": end.timestamp() if end else None,
        "efficiency": efficiency,
    }


class PageCache:
    """The page rendered last, handed to every reader for *max_age_s* (the caller's
    ``api.status_cache_s``); readers arriving while it is rendered wait for that render
    rather than start their own.

    The HTML is made in a worker thread: the loop thread's CPU is what admission control
    measures (:mod:`tssd.api.admission`), and this listener's readers are nobody's pools.
    """

    def __init__(self) -> None:
        self._body = b""
        self._made_at = float("-inf")
        self._pending: asyncio.Future[bytes] | None = None

    async def get(self, build: Callable[[], Awaitable[Page]], max_age_s: float) -> bytes:
        if asyncio.get_running_loop().time() - self._made_at < max_age_s:
            return self._body
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._make(build))
        # Shielded: a reader that hangs up does not cancel the others' render.
        return await asyncio.shield(self._pending)

    async def _make(self, build: Callable[[], Awaitable[Page]]) -> bytes:
        try:
            page = await build()
            body = await asyncio.to_thread(lambda: render(page).encode("utf-8"))
            self._body, self._made_at = body, asyncio.get_running_loop().time()
            return body
        finally:
            self._pending = None


PAGE_CACHE: web.AppKey[PageCache] = web.AppKey("status_page_cache", PageCache)


def add_page_cache(app: web.Application) -> None:
    app[PAGE_CACHE] = PageCache()


async def status_page(request: web.Request) -> web.Response:
    max_age_s = services(request).settings.api.status_cache_s
    body = await request.app[PAGE_CACHE].get(lambda: build_page(request), max_age_s)
    headers = {"Content-Security-Policy": POLICY, "Cache-Control": "no-store"}
    return web.Response(body=body, content_type="text/html", charset="utf-8", headers=headers)

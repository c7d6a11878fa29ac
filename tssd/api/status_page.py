"""``GET /status``: the read-only status page, on the metrics listener (docs/operations.md).

Server-rendered (:mod:`tssd.api.status_html`): it works on an air-gapped tape server, in
a browser with scripts off, and exposes nothing the metrics listener did not (it binds
127.0.0.1 by default). Each request costs a bounded amount of work: at most
:data:`MOUNTS_MAX` mounts, :data:`WEAR_MAX` tapes, one row per drive.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

from aiohttp import web

from tssd.api.helpers import services
from tssd.api.status_html import Page, render
from tssd.api.top import drive_lines
from tssd.db.admin import mount_json
from tssd.db.glance import GlanceStore, wear
from tssd.db.models import Mount, utcnow

#: Most mounts drawn on the timeline (the newest of the last 24 hours).
MOUNTS_MAX = 5000
#: Tapes listed under wear.
WEAR_MAX = 10
#: Nothing on the page is fetched or run: styles are inline, the icon is empty.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"


async def build_page(request: web.Request) -> Page:
    svc = services(request)
    glance = GlanceStore(svc.store.sessions)
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


async def status_page(request: web.Request) -> web.Response:
    page = render(await build_page(request))
    headers = {"Content-Security-Policy": POLICY, "Cache-Control": "no-store"}
    return web.Response(text=page, content_type="text/html", charset="utf-8", headers=headers)

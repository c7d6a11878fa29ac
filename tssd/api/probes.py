"""Daemon-wide reads: ``/v1/status``, ``/healthz``, ``/metrics``, ``/status`` and
``/openapi.json``. The probes also serve alone on the metrics listener (``api.metrics_tcp``).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from tssd.api.helpers import services
from tssd.api.openapi import openapi_document
from tssd.api.status_page import add_page_cache, status_page
from tssd.errors import NotFound
from tssd.metrics import CONTENT_TYPE


async def status(request: web.Request) -> web.Response:
    return web.json_response(await services(request).status())


async def healthz(request: web.Request) -> web.Response:
    ok = services(request).accepting
    return web.json_response({"status": "ok" if ok else "stopping"}, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    # In a thread, as the status page: an unauthenticated scraper's loop is no pool's load
    # (admission control measures the event loop thread's CPU).
    body = await asyncio.to_thread(services(request).metrics.exposition)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def add_routes(app: web.Application) -> None:
    """The full API's daemon-wide routes (the probes are mounted on their own)."""
    app.router.add_get("/v1/status", status)
    app.router.add_get("/openapi.json", openapi)


async def not_the_api(request: web.Request) -> web.Response:
    # A client given the metrics port by mistake learns which port it reached.
    raise NotFound(
        "this is tssd's metrics listener (api.metrics_tcp: /metrics, /healthz, /status), "
        "not its API: point tssctl or tss-hsm at the API socket ($TSSD_HOME/tssd.sock, or "
        "/run/tssd/tssd.sock of the systemd unit) or at api.tcp"
    )


def add_listener_routes(app: web.Application) -> None:
    """The metrics listener's answer to an API path."""
    app.router.add_route("*", "/v1/{tail:.*}", not_the_api)


def add_probe_routes(app: web.Application) -> None:
    add_page_cache(app)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status_page)

"""Operator routes: queues, drives, tapes, mount history and the efficiency report.

The queries are the ports :class:`tssd.ports.reports.Admin` and
:class:`~tssd.ports.reports.Efficiency` (``services.admin``, ``services.reports``); this
module parses parameters, applies live changes (drive enable/disable) and shapes the
JSON (docs/api.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from aiohttp import web

from tssd.api.helpers import read_json, services
from tssd.api.params import (
    DRIVE_PATH,
    QUEUE_PATH,
    VOLUME_PATH,
    MountsParams,
    ReportParams,
    TapesParams,
    query_params,
)
from tssd.bodies import UNSET as UNSET_BODY
from tssd.bodies import QueuePatch, convert
from tssd.errors import InvalidRequest
from tssd.ports.reports import UNSET, Admin, MountFilter
from tssd.services import Services

log = structlog.get_logger()


def admin(request: web.Request) -> Admin:
    return services(request).admin


def optional_time(raw: str | None, name: str) -> datetime | None:
    """A ``date-time`` query parameter (:mod:`tssd.api.params`), UTC unless it says."""
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be an ISO 8601 time, got {raw!r}") from None
    # Years at the ends of datetime's range overflow in arithmetic (found by fuzzing).
    if not 1970 <= value.year <= 9998:
        raise InvalidRequest(f"{name} must be between the years 1970 and 9998, got {raw!r}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# -- queues -----------------------------------------------------------------------------


async def list_queues(request: web.Request) -> web.Response:
    default = services(request).settings.scheduler.default_queue
    return web.json_response({"queues": await admin(request).queues(always=default)})


async def set_queue(request: web.Request) -> web.Response:
    name = QUEUE_PATH.value(request)
    body = convert(await read_json(request), QueuePatch)
    changes: dict[str, Any] = {
        f: v for f in body.__struct_fields__ if (v := getattr(body, f)) is not UNSET_BODY
    }
    queue = await admin(request).set_queue(
        name,
        priority=changes.get("priority"),
        max_drives=changes.get("max_drives", UNSET),
        paused=changes.get("paused"),
        latency_target_s=changes.get("latency_target_s", UNSET),
    )
    log.info("queue.changed", queue=name, **changes)
    # The scheduler rereads the queues table: a resumed queue may start work now.
    services(request).scheduler.work.queues_changed()
    return web.json_response({"queue": queue})


# -- drives -----------------------------------------------------------------------------


def _live(svc: Services, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The database view of the drives, with the in-memory state of this daemon."""
    for row in rows:
        state = svc.drives.drives.get(row["name"])
        if state is not None:
            row.update(state=state.state, volume=state.volume, last_error=state.last_error)
    # How a SCSI drive positions (LOCATE, or rewind and space filemarks when it has none).
    positioning = getattr(svc.backend, "positioning", None)
    if callable(positioning):
        known = positioning()
        for row in rows:
            if row["name"] in known:
                row["positioning"] = known[row["name"]]
    return rows


async def list_drives(request: web.Request) -> web.Response:
    svc = services(request)
    return web.json_response({"drives": _live(svc, await admin(request).drives())})


async def enable_drive(request: web.Request) -> web.Response:
    return await _set_enabled(request, True)


async def disable_drive(request: web.Request) -> web.Response:
    return await _set_enabled(request, False)


async def _set_enabled(request: web.Request, enabled: bool) -> web.Response:
    svc = services(request)
    name = DRIVE_PATH.value(request)
    await admin(request).set_drive_enabled(name, enabled)
    svc.drives.set_enabled(name, enabled)
    log.info("drive.operator_enable" if enabled else "drive.operator_disable", drive=name)
    svc.scheduler.work.nudge()
    rows = _live(svc, await admin(request).drives())
    return web.json_response({"drive": next(d for d in rows if d["name"] == name)})


# -- tapes and mounts -------------------------------------------------------------------


async def list_tapes(request: web.Request) -> web.Response:
    params = query_params(request, TapesParams)
    limit, after = params.limit, params.after
    # The planner's per-tape index counts the queued recalls without a query (issue 22).
    planner = services(request).scheduler.planner
    queued = None
    if planner is not None:
        queued = {v: (len(t), t.bytes) for v, t in planner.tapes.items()}
    tapes, nxt = await admin(request).tapes(limit, after, queued)
    return web.json_response({"tapes": tapes, "next": nxt})


async def show_tape(request: web.Request) -> web.Response:
    volume = VOLUME_PATH.value(request)
    return web.json_response({"tape": await admin(request).tape(volume)})


async def list_mounts(request: web.Request) -> web.Response:
    q = query_params(request, MountsParams)
    flt = MountFilter(
        since=optional_time(q.since, "since"),
        until=optional_time(q.until, "until"),
        drive=q.drive,
        volume=q.volume,
        limit=q.limit,
        after=q.after,
        newest=q.newest,
    )
    mounts, nxt = await admin(request).mounts(flt)
    return web.json_response({"mounts": mounts, "next": nxt})


async def efficiency_report(request: web.Request) -> web.Response:
    q = query_params(request, ReportParams)
    until = optional_time(q.until, "until") or datetime.now(UTC)
    since = optional_time(q.since, "since") or until - timedelta(days=1)
    if since >= until:
        raise InvalidRequest("since must be before until")
    bins = q.bins
    report = await services(request).reports.efficiency(since, until, bins)
    return web.json_response(report)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/queues", list_queues)
    app.router.add_patch("/v1/queues/{name}", set_queue)
    app.router.add_get("/v1/drives", list_drives)
    app.router.add_post("/v1/drives/{name}/enable", enable_drive)
    app.router.add_post("/v1/drives/{name}/disable", disable_drive)
    app.router.add_get("/v1/tapes", list_tapes)
    app.router.add_get("/v1/tapes/{volume}", show_tape)
    app.router.add_get("/v1/mounts", list_mounts)
    app.router.add_get("/v1/report/efficiency", efficiency_report)

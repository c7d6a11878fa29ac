"""``GET /v1/top``: one answer with everything ``tssctl top`` draws (docs/api.md).

Drives come from the database (every instance sharing it) overlaid with this daemon's
live state; a drive's *planned* reads are what its mount has read so far, the requests
it has claimed and not finished, and, for a recall, the requests still queued for its
tape (the planner's count: they join the session as it reaches them). Rates, latencies
and queue depth are this daemon's recent activity (:mod:`tssd.activity`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp import web

from tssd.api.helpers import services
from tssd.clock import utcnow
from tssd.domain import Drive, Mount
from tssd.ports.reports import Glance, mount_json, seconds
from tssd.scheduler.core import Scheduler
from tssd.scheduler.drives import DriveState
from tssd.services import Services

#: Mounts listed under "last mounts".
LAST_MOUNTS = 8
#: Most queues in one answer (the ones with work first, then by name).
QUEUES_MAX = 64


async def top_view(svc: Services) -> dict[str, Any]:
    glance = svc.glance
    drives = await drive_lines(svc, glance)
    queues = await queue_lines(svc)
    newest = await glance.last_mounts(LAST_MOUNTS)
    mounts = [_live_mount(svc, mount_json(m)) for m in reversed(newest)]  # oldest first
    done_1h = sum(q["done_1h"] for q in queues)
    return {
        "at": utcnow().isoformat(),
        "instance": svc.cluster.instance if svc.cluster else None,
        "drives": drives,
        "queues": queues,
        "mounts": mounts,
        "totals": {
            "drives": len(drives),
            "drives_busy": sum(1 for d in drives if d["state"] == "busy"),
            "queued": sum(q["queued"] for q in queues),
            "active": sum(q["active"] for q in queues),
            "done_1h": done_1h,
            "mb_s": round(sum(d["mb_s"] or 0.0 for d in drives), 3),
            "mb_s_last_minute": svc.drives.throughput()["mb_s"],
        },
    }


def _live_mount(svc: Services, mount: dict[str, Any]) -> dict[str, Any]:
    """An open mount of this daemon with its counters now (the row has them per batch)."""
    drive = svc.drives.drives.get(mount["drive"])
    if mount["open"] and drive is not None and drive.mount_id == mount["id"]:
        mount.update(files=drive.files, bytes=drive.bytes)
    return mount


async def drive_lines(svc: Services, glance: Glance) -> list[dict[str, Any]]:
    rows = {d.name: d for d in await glance.drives()}
    # Another instance's drives: their mounts from the database (ours are in memory).
    opened = await glance.open_mounts() if set(rows) - set(svc.drives.drives) else {}
    claimed = await glance.active_per_drive()
    names = sorted(set(rows) | set(svc.drives.drives))
    lines = []
    for name in names:
        live = svc.drives.drives.get(name)
        line = _live_drive(svc, live) if live else _db_drive(rows[name], opened.get(name))
        line["instance"] = rows[name].instance if name in rows else None
        _plan(svc.scheduler, line, claimed.get(name, (0, 0)))
        lines.append(line)
    return lines


def _live_drive(svc: Services, drive: DriveState) -> dict[str, Any]:
    now = svc.drives.clock.now()
    mounted = drive.volume is not None
    rate = svc.drives.activity.rate(drive.name, now, drive.mounted_at) if mounted else 0.0
    line = {
        "name": drive.name,
        "state": drive.state,
        "volume": drive.volume,
        "purpose": "+".join(sorted(drive.purposes)) if mounted else None,
        "mounted_s": round(now - drive.mounted_at, 1) if mounted else None,
        "files_done": drive.files if mounted else 0,
        "bytes_done": drive.bytes if mounted else 0,
        "mb_s": round(rate / 1e6, 3),
    }
    run = svc.scheduler.chooser.running.get(drive.name)
    if drive.busy and not mounted and run is not None:  # the robot is fetching its tape
        line.update(state="mounting", volume=run.volume, purpose="recall")
    return line


def _db_drive(row: Drive, mount: Mount | None) -> dict[str, Any]:
    """Another instance's drive: what the database knows (no current rate)."""
    return {
        "name": row.name,
        "state": row.state if row.enabled else "disabled",
        "volume": row.volume,
        "purpose": mount.purpose if mount else None,
        "mounted_s": seconds(mount.requested_at, utcnow()) if mount else None,
        "files_done": mount.files if mount else 0,
        "bytes_done": mount.bytes if mount else 0,
        "mb_s": None,
    }


def _plan(scheduler: Scheduler, line: dict[str, Any], claimed: tuple[int, int]) -> None:
    waiting = (0, 0)
    volume, planner = line["volume"], scheduler.planner
    if volume and "recall" in (line["purpose"] or "") and planner is not None:
        tape = planner.tapes.get(volume)
        waiting = (len(tape), tape.bytes) if tape is not None else (0, 0)
        # A recall's size is the catalog's, known to the planner, not to the request row.
        claimed = max(claimed, scheduler.runner.claimed_on(volume))
    line["files_planned"] = line["files_done"] + claimed[0] + waiting[0]
    line["bytes_planned"] = line["bytes_done"] + claimed[1] + waiting[1]


async def queue_lines(svc: Services) -> list[dict[str, Any]]:
    default = svc.settings.scheduler.default_queue
    rows = await svc.admin.queues(always=default)
    now, wall = svc.drives.clock.now(), utcnow()
    listed = {q["name"] for q in rows}
    # A queue that emptied within the hour still has its p95 to show.
    rows += [_idle_queue(q) for q in svc.drives.activity.served(now) if q not in listed]
    rows.sort(key=lambda q: (not (q["queued"] or q["active"]), q["name"]))
    etas = queue_etas(svc.scheduler, now)
    lines = []
    for q in rows[:QUEUES_MAX]:
        p95, done = svc.drives.activity.p95(q["name"], now)
        oldest = q["oldest_queued_at"]
        open_ = q["queued"] + q["active"]
        lines.append(
            {
                "name": q["name"],
                "paused": q["paused"],
                "queued": q["queued"],
                "active": q["active"],
                "oldest_wait_s": seconds(datetime.fromisoformat(oldest), wall) if oldest else None,
                "p95_1h_s": None if p95 is None else round(p95, 1),
                "done_1h": done,
                # Set by queues that have a latency target; absent otherwise.
                "latency_target_s": q.get("latency_target_s"),
                "eta_s": etas.get(q["name"]) if open_ else None,
            }
        )
    return lines


def _idle_queue(name: str) -> dict[str, Any]:
    return {"name": name, "paused": False, "queued": 0, "active": 0, "oldest_queued_at": None}


def queue_etas(scheduler: Scheduler, now: float) -> dict[str, float | None]:
    """Seconds until each queue's last pending recall should be read (None: unknown).

    From the scheduler's last pass: a tape being read ends at its session's estimated
    end, a tape in line at its planned start plus its service time; a tape held by a rule
    (paused, budget, fill wait) has no estimate, and neither then has its queue.
    """
    chooser, planner = scheduler.chooser, scheduler.planner
    if planner is None:
        return {}
    etas: dict[str, float | None] = {}
    unknown: set[str] = set()
    reading: dict[str, float] = {}
    for run in chooser.running.values():
        reading[run.volume] = run.until
        _later(etas, run.queue, run.until - now)
    for tape in planner.queues():
        verdict = chooser.verdicts.get(tape.volume)
        end: float | None = reading.get(tape.volume)
        if end is None and verdict is not None and tape.volume in chooser.starts:
            end = chooser.starts[tape.volume] + verdict.service_s
        for queue in tape.queues:
            if end is None:
                unknown.add(queue)
            else:
                _later(etas, queue, end - now)
    return {q: (None if q in unknown else v) for q, v in etas.items()} | dict.fromkeys(unknown)


def _later(etas: dict[str, float | None], queue: str, seconds_left: float) -> None:
    etas[queue] = round(max(etas.get(queue) or 0.0, seconds_left, 0.0), 1)


async def top(request: web.Request) -> web.Response:
    return web.json_response(await top_view(services(request)))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/top", top)

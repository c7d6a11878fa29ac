"""Why a request waits, and when it should be served: ``GET /v1/requests/{id}/why``.

Answers from the scheduler's last pass (verdicts and estimated tape start times, see
``choose.py``) without touching the database beyond the request row. ``rule`` is a
stable short name:

- ``done``: finished (done, failed or cancelled);
- ``active``: being read or written now;
- ``locating``: queued, its tape copy not chosen yet;
- ``tape_busy``: its tape is in a session that has passed its position: next pass;
- ``queue_paused``, ``max_drives``, ``mount_budget``, ``fill_wait``, ``tape_unavailable``:
  the rule holding its tape back (``cost.py``);
- ``drives_busy``: its tape is in line but every drive is working;
- ``queued_position``: its tape is in line for the next free drive.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tssd.db.models import Request, utcnow

if TYPE_CHECKING:
    from tssd.scheduler.core import Scheduler

FINISHED = ("done", "failed", "cancelled", "abandoned")


def explain(scheduler: Scheduler, row: Request) -> dict[str, Any]:
    """The ``why`` answer for *row*: id, state, rule, detail, eta_s, eta."""
    rule, detail, eta_s = _why(scheduler, row)
    eta = None if eta_s is None else (utcnow() + timedelta(seconds=eta_s)).isoformat()
    return {
        "id": row.id,
        "state": row.state,
        "rule": rule,
        "detail": detail,
        "eta_s": None if eta_s is None else round(eta_s, 1),
        "eta": eta,
    }


def eta_fields(scheduler: Scheduler, row: Request) -> dict[str, Any]:
    """``eta_s`` and ``eta`` for the request JSON."""
    answer = explain(scheduler, row)
    return {"eta_s": answer["eta_s"], "eta": answer["eta"]}


def _why(scheduler: Scheduler, row: Request) -> tuple[str, str, float | None]:
    if row.state in FINISHED:
        return "done", f"request is {row.state}", 0.0
    chooser = scheduler.chooser
    now = scheduler.drives.clock.now()
    if row.state == "active":
        running = chooser.running.get(row.drive or "")
        left = max(0.0, running.until - now) if running else None
        return "active", f"being served on drive {row.drive}", left
    held = scheduler.runner.backpressure.held_reason(row) if scheduler.runner.backpressure else None
    if held is not None:  # tssd/backpressure.py: its destination file system is full
        return "disk_full", held, None
    if row.volume is None:
        return "locating", "waiting for its tape copy to be chosen", None
    volume = row.volume
    running = next((r for r in chooser.running.values() if r.volume == volume), None)
    if running is not None:
        return (
            "tape_busy",
            f"tape {volume} is in a session past this file; it is read on the next pass",
            max(0.0, running.until - now),
        )
    verdict = chooser.verdicts.get(volume)
    tape = chooser.planner.tapes.get(volume)
    if verdict is None or tape is None:
        return "queued_position", f"tape {volume} waits for the next scheduling pass", None
    if verdict.rule:
        return (
            verdict.rule,
            _held_detail(scheduler, verdict.rule, volume),
            _held_eta(scheduler, verdict.rule, volume, now),
        )
    start = chooser.starts.get(volume, now)
    ahead = sum(
        1 for e in tape.entries.values() if (e.position, e.id) < (row.position or 0, row.id)
    )
    within = verdict.mount_s + (verdict.service_s - verdict.mount_s) * ahead / max(1, len(tape))
    eta = max(0.0, start - now) + within
    line = sorted(chooser.starts, key=chooser.starts.__getitem__).index(volume) + 1
    if start > now:
        return "drives_busy", f"tape {volume} is number {line} in line; every drive is busy", eta
    return "queued_position", f"tape {volume} is number {line} in line for a free drive", eta


def _held_detail(scheduler: Scheduler, rule: str, volume: str) -> str:
    s = scheduler.settings
    return {
        "queue_paused": f"every queue with requests on tape {volume} is paused",
        "max_drives": f"the queues of tape {volume} use all the drives they may",
        "mount_budget": f"tape {volume} was mounted {s.mount_budget_per_day} times in 24 h",
        "fill_wait": f"tape {volume} holds little work: waits up to {s.fill_wait_s:g} s for more",
        "tape_unavailable": f"tape {volume} is not available for mounting",
    }.get(rule, rule)


def _held_eta(scheduler: Scheduler, rule: str, volume: str, now: float) -> float | None:
    s = scheduler.settings
    tape = scheduler.chooser.planner.tapes.get(volume)
    if rule == "fill_wait" and tape is not None:
        return max(0.0, tape.oldest() + s.fill_wait_s - now)
    if rule == "mount_budget":
        ledger = scheduler.drives.ledger
        return max(0.0, ledger.free_at(volume, now, s.mount_budget_per_day) - now)
    return None

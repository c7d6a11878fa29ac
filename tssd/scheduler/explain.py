"""Why a request waits, and when it should be served: ``GET /v1/requests/{id}/why``.

Answers from the scheduler's last pass (verdicts and estimated tape start times, see
``choose.py``) without touching the database beyond the request row. ``rule`` is a
stable short name, one of ``rules.RULES``: a hold rule names what holds the request's tape
back (its detail and ETA come from the rule's row in ``rules.py``); the other answers are
``done``, ``active``, ``disk_full``, ``locating``, ``tape_busy``, ``drives_busy`` and
``queued_position`` (``rules.ANSWERS``).

When the request's queue has a latency target (``tssctl queues set NAME --target 1h``) the
answer also gives ``target_s``, the ``deadline`` (arrival + target), ``slack_s`` (deadline
minus ETA, or minus the finish time once finished; negative: late) and ``on_target``
(true/false, None while the ETA is unknown); all None without a target.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from tssd.domain import Request, State
from tssd.scheduler.rules import RULES, Held

if TYPE_CHECKING:
    from tssd.scheduler.core import Scheduler

FINISHED = (State.DONE, State.FAILED, State.CANCELLED, State.ABANDONED)


class Timed(Protocol):
    """What the latency-target fields read of a request (a ``Request``)."""

    @property
    def state(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...

    @property
    def finished_at(self) -> datetime | None: ...


def explain(scheduler: Scheduler, row: Request) -> dict[str, Any]:
    """The ``why`` answer for *row*: id, state, rule, detail, eta_s, eta."""
    rule, detail, eta_s = _why(scheduler, row)
    now = datetime.now(UTC)
    eta = None if eta_s is None else (now + timedelta(seconds=eta_s)).isoformat()
    policy = scheduler.chooser.queues.get(row.queue)
    return {
        "id": row.id,
        "state": row.state,
        "rule": rule,
        "detail": detail,
        "eta_s": None if eta_s is None else round(eta_s, 1),
        "eta": eta,
        "queue": row.queue,
        **against_target(row, policy.latency_target_s if policy else None, eta_s, now),
    }


def against_target(
    row: Timed, target_s: float | None, eta_s: float | None, now: datetime
) -> dict[str, Any]:
    """``target_s``, ``deadline``, ``slack_s``, ``on_target`` of *row* (see above)."""
    if target_s is None:
        return {"target_s": None, "deadline": None, "slack_s": None, "on_target": None}
    deadline = row.created_at + timedelta(seconds=target_s)
    if row.state in FINISHED and row.finished_at is not None:
        done: datetime | None = row.finished_at
    else:
        done = None if eta_s is None else now + timedelta(seconds=eta_s)
    slack = None if done is None else (deadline - done).total_seconds()
    return {
        "target_s": target_s,
        "deadline": deadline.isoformat(),
        "slack_s": None if slack is None else round(slack, 1),
        "on_target": None if slack is None else slack >= 0,
    }


def eta_fields(scheduler: Scheduler, row: Request) -> dict[str, Any]:
    """``eta_s`` and ``eta`` for the request JSON."""
    answer = explain(scheduler, row)
    return {"eta_s": answer["eta_s"], "eta": answer["eta"]}


def _why(scheduler: Scheduler, row: Request) -> tuple[str, str, float | None]:
    if row.state in FINISHED:
        # Nothing is expected of a finished request: an ETA of "now" read as if it were
        # still coming (tssctl showed one for every done request).
        return "done", f"request is {row.state}", None
    chooser = scheduler.chooser
    now = scheduler.drives.clock.now()
    if row.state is State.ACTIVE:
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
        rule = RULES[verdict.rule]
        facts = Held(volume, scheduler.settings, tape, now, scheduler.drives.ledger)
        return rule.name, rule.describe(volume, scheduler.settings), rule.eta(facts)
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

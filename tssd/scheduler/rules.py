"""Every answer of ``tssctl why`` in one table: the rules that hold a tape back, and the rest.

A **hold rule** keeps an eligible tape from the next free drive. Each is declared once
here, with

- ``name``: the stable short name (``Verdict.rule``, the ``why`` answer's ``rule``, the
  OpenAPI enum, metrics and docs);
- ``meaning``: one line for ``tssctl why`` (``cli/views.py``);
- ``detail``: the ``why`` answer's ``detail``, a :meth:`str.format` template over
  ``volume`` and ``s`` (the scheduler settings);
- ``eta``: seconds until the rule lets the tape go, None when unknown (:class:`Held`);
- ``test``: whether the rule holds the tape this pass (:class:`Facts`).

``cost.evaluate`` tries the hold rules in table order and the first that holds names the
verdict, so a rule placed later only sees tapes the earlier ones let through (the order
is the one the scheduler has always used). ``ANSWERS`` are the other answers of ``why``
(done, active, in line, ...): ``explain.py`` gives those from the request and the pass.

Adding a hold rule: a :class:`Rule` in ``HOLD_RULES`` below, plus, if its test needs a
fact the pass does not have yet, the one place that fact comes from (docs/architecture.md,
"Adding a hold rule"). ``tests/unit/test_rules.py`` fails until every view knows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: tssctl reads this table without the scheduler's imports
    from tssd.config import SchedulerSettings
    from tssd.scheduler.context import Context
    from tssd.scheduler.planner import TapeQueue
    from tssd.scheduler.queues import MountLedger


@dataclass(slots=True)  # not frozen: built for every tape of every pass, kept cheap
class Facts:
    """What a hold rule's test knows of one tape in one scheduling pass (read-only)."""

    tape: TapeQueue
    ctx: Context
    #: The tape sits in a free drive (no mount needed).
    mounted: bool
    #: Its queues not paused, and those of them below their ``max_drives``.
    unpaused: frozenset[str] | set[str]
    room: frozenset[str] | set[str]
    #: Effective priority (request + queue, at least 1 when late for a target).
    priority: int
    #: Less queued than ``fill_bytes`` and ``fill_files``.
    small: bool
    #: Seconds the oldest request has waited.
    age: float


@dataclass(frozen=True, slots=True)
class Held:
    """What a hold rule's ETA knows: the tape, its queue in the planner, the mount ledger."""

    volume: str
    settings: SchedulerSettings
    tape: TapeQueue | None
    now: float
    ledger: MountLedger


def _no_eta(_: Held) -> float | None:
    return None


@dataclass(frozen=True, slots=True)
class Rule:
    """One answer of ``tssctl why``; a hold rule when it has a ``test``."""

    name: str
    meaning: str
    detail: str = ""
    eta: Callable[[Held], float | None] = _no_eta
    test: Callable[[Facts], bool] | None = None

    def describe(self, volume: str, settings: SchedulerSettings) -> str:
        """The ``why`` detail for a tape this rule holds."""
        return self.detail.format(volume=volume, s=settings)


# --- the hold rules, in the order evaluate tries them ----------------------------------


def _queue_paused(f: Facts) -> bool:
    return not f.unpaused


def _max_drives(f: Facts) -> bool:
    return not f.room


def _mount_budget(f: Facts) -> bool:
    budget = f.ctx.settings.mount_budget_per_day
    return not f.mounted and budget > 0 and f.ctx.mounts_today(f.tape.volume) >= budget


def _budget_eta(h: Held) -> float | None:
    budget = h.settings.mount_budget_per_day
    return max(0.0, h.ledger.free_at(h.volume, h.now, budget) - h.now)


def _fill_wait(f: Facts) -> bool:
    s = f.ctx.settings
    return (
        not f.mounted and f.small and f.priority <= 0 and f.age < min(s.fill_wait_s, s.max_wait_s)
    )


def _fill_eta(h: Held) -> float | None:
    if h.tape is None:
        return None
    return max(0.0, h.tape.oldest() + h.settings.fill_wait_s - h.now)


def _tape_unavailable(f: Facts) -> bool:
    return not f.ctx.mountable(f.tape.volume)


def _drive_cleaning_due(f: Facts) -> bool:
    # A mount on a drive that asked for cleaning risks read errors that health.py then
    # counts against the drive and the tape: the tape waits for a clean drive instead.
    free = f.ctx.free
    return not f.mounted and bool(free) and all(d.cleaning_due for d in free)


HOLD_RULES: tuple[Rule, ...] = (
    Rule(
        "queue_paused",
        "its queue is paused (tssctl queues set NAME --resume)",
        "every queue with requests on tape {volume} is paused",
        test=_queue_paused,
    ),
    Rule(
        "max_drives",
        "its queue already uses its maximum number of drives",
        "the queues of tape {volume} use all the drives they may",
        test=_max_drives,
    ),
    Rule(
        "mount_budget",
        "its tape has used its mount budget for today",
        "tape {volume} was mounted {s.mount_budget_per_day} times in 24 h",
        eta=_budget_eta,
        test=_mount_budget,
    ),
    Rule(
        "fill_wait",
        "its tape waits for more requests before it is worth a mount",
        "tape {volume} holds little work: waits up to {s.fill_wait_s:g} s for more",
        eta=_fill_eta,
        test=_fill_wait,
    ),
    Rule(
        "tape_unavailable",
        "its tape may not be mounted now (health, another tssd's claim)",
        "tape {volume} is not available for mounting",
        test=_tape_unavailable,
    ),
    Rule(
        "drive_cleaning_due",
        "every free drive has asked for cleaning; mounts wait for a clean drive",
        "tape {volume} needs a mount and every free drive has asked for cleaning",
        test=_drive_cleaning_due,
    ),
)

# --- the other answers of ``why`` (explain.py gives their detail) ----------------------

ANSWERS: tuple[Rule, ...] = (
    Rule("done", "finished"),
    Rule("active", "being served now"),
    Rule("disk_full", "the destination has no room; held until space frees up"),
    Rule("locating", "its tape copy is not chosen yet"),
    Rule("tape_busy", "its tape is in use (being read, written or moved)"),
    Rule("drives_busy", "every drive is busy with other tapes"),
    Rule("queued_position", "waiting its turn behind other work"),
)

RULES: Mapping[str, Rule] = {r.name: r for r in (*HOLD_RULES, *ANSWERS)}


def rule_names() -> list[str]:
    """Every ``rule`` a ``why`` answer may give (the OpenAPI enum)."""
    return list(RULES)


def meaning(name: str) -> str:
    """The one-line meaning of *name* for ``tssctl why`` ("-" when unknown)."""
    rule = RULES.get(name)
    return rule.meaning if rule else "-"

"""Priority tiers: which claimed higher-priority requests interrupt a recall pass."""

from __future__ import annotations

from types import SimpleNamespace

from tssd.scheduler.planner import Planner
from tssd.scheduler.tiers import PriorityTiers


def drives(now: float) -> SimpleNamespace:
    return SimpleNamespace(clock=SimpleNamespace(now=lambda: now), drives={})


def test_without_a_planner_held_requests_never_interrupt_a_pass() -> None:
    """tss and fifo know no arrival for a claimed request: holding it would interrupt
    the pass after every file (issue 18 point 7)."""
    tiers = PriorityTiers(drives(1000.0), interrupt_after_s=60.0)  # type: ignore[arg-type]
    tiers.set_floor("d0", None)
    tiers.hold("d0", {1: (10, 0.0)})
    assert not tiers.interrupted("d0", "A")


def test_with_a_planner_a_held_request_interrupts_once_it_waited() -> None:
    tiers = PriorityTiers(drives(1000.0), Planner(), interrupt_after_s=60.0)  # type: ignore[arg-type]
    tiers.set_floor("d0", None)
    tiers.hold("d0", {1: (10, 950.0)})
    assert not tiers.interrupted("d0", "A")
    tiers.hold("d0", {1: (10, 900.0)})
    assert tiers.interrupted("d0", "A")

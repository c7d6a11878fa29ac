"""Priority tiers: which claimed higher-priority requests interrupt a recall pass."""

from __future__ import annotations

from dataclasses import dataclass

from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.planner import Planner
from tssd.scheduler.tiers import PriorityTiers


@dataclass
class SetClock:
    """A clock that reads what the test sets."""

    at: float

    def now(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.at += max(seconds, 0.0)


def drives(now: float) -> DriveSessions:
    return DriveSessions({}, SetClock(now))


def test_without_a_planner_held_requests_never_interrupt_a_pass() -> None:
    """tss and fifo know no arrival for a claimed request: holding it would interrupt
    the pass after every file (issue 18 point 7)."""
    tiers = PriorityTiers(drives(1000.0), interrupt_after_s=60.0)
    tiers.set_floor("d0", None)
    tiers.hold("d0", {1: (10, 0.0)})
    assert not tiers.interrupted("d0", "A")


def test_with_a_planner_a_held_request_interrupts_once_it_waited() -> None:
    tiers = PriorityTiers(drives(1000.0), Planner(), interrupt_after_s=60.0)
    tiers.set_floor("d0", None)
    tiers.hold("d0", {1: (10, 950.0)})
    assert not tiers.interrupted("d0", "A")
    tiers.hold("d0", {1: (10, 900.0)})
    assert tiers.interrupted("d0", "A")

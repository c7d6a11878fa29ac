"""Time as tssd sees it.

Everything that waits or timestamps goes through a :class:`Clock` so that ``tssd simulate``
can run the same code in virtual time. The protocol stays small on purpose: a virtual
clock only has to advance a counter and wake sleepers in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds, for durations only (the origin is arbitrary)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait *seconds* (non-positive values only yield to the event loop)."""
        ...

    def wall(self) -> datetime:
        """The current time of day, timezone-aware UTC, for timestamps."""
        ...


def utcnow() -> datetime:
    """The time of day, timezone-aware UTC: the default timestamp of rows and records."""
    return datetime.now(UTC)


class RealClock:
    """The host's clocks."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def wall(self) -> datetime:
        return datetime.now(UTC)


class Offload(Protocol):
    """How a piece of CPU-bound work (a read-order tour of a large batch) is run."""

    def __call__(self, work: Callable[[], T], /) -> Awaitable[T]: ...


async def in_thread(work: Callable[[], T]) -> T:
    """Real time: on a worker thread, so the event loop keeps answering polls meanwhile."""
    return await asyncio.to_thread(work)


async def inline(work: Callable[[], T]) -> T:
    """Virtual time: on the loop itself; with a thread the simulated clock would jump
    ahead while the loop looked idle, and runs would stop being reproducible."""
    return work()

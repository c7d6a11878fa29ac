"""Recent activity kept in memory for ``tssctl top`` and the ``/status`` page.

Three bounded windows, each fed in O(1) by the component that sees the event:

- bytes each drive moved in the last :data:`RATE_WINDOW_S` seconds (its current MB/s);
- how long the requests of each queue took, finished in the last hour (p95);
- queue depth sampled every ``api.status_sample_s`` over the last 24 hours.

Nothing here touches the database: the figures are this daemon's own since it started,
and a restart begins them afresh (the durable history is the ``mounts`` table).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from tssd.background import running
from tssd.db.engine import DatabaseError

log = structlog.get_logger()

#: Window of a drive's current rate.
RATE_WINDOW_S = 30.0
#: Window of the latency percentile.
LATENCY_WINDOW_S = 3600.0
#: Most latencies kept per queue (a busy hour keeps its newest ones).
LATENCY_MAX = 20_000
#: Most queues followed for latency (names are user input: a bound on memory).
QUEUES_MAX = 256
#: Queue depth history.
DEPTH_WINDOW_S = 86400.0
#: Most samples kept, whatever the sampling interval.
DEPTH_MAX = 5000
#: Queues named in each depth sample (the deepest); the rest count in the totals only.
DEPTH_QUEUES = 8


@dataclass(frozen=True)
class DepthSample:
    """Queue depth at one moment: wall-clock seconds, totals, the deepest queues."""

    at: float
    queued: int
    active: int
    queues: tuple[tuple[str, int], ...]  # (queue, queued), deepest first


class Activity:
    def __init__(self, depth_every_s: float = 60.0) -> None:
        self._moved: dict[str, deque[tuple[float, int]]] = {}
        self._latency: dict[str, deque[tuple[float, float]]] = {}
        self.depth: deque[DepthSample] = deque()
        self.sample_every(depth_every_s)

    def sample_every(self, seconds: float) -> None:
        """Size the depth history for one sample every *seconds* over a day."""
        self.depth_every_s = every = max(1.0, seconds)
        keep = min(DEPTH_MAX, math.ceil(DEPTH_WINDOW_S / every) + 1)
        self.depth = deque(self.depth, maxlen=keep)

    # -- drives -----------------------------------------------------------------------

    def moved(self, drive: str, nbytes: int, now: float) -> None:
        window = self._moved.setdefault(drive, deque())
        window.append((now, nbytes))
        _prune(window, now - RATE_WINDOW_S)

    def rate(self, drive: str, now: float, since: float | None = None) -> float:
        """Bytes per second over the window (or since *since*, when the mount is newer)."""
        window = self._moved.get(drive)
        if not window:
            return 0.0
        _prune(window, now - RATE_WINDOW_S)
        span = RATE_WINDOW_S if since is None else min(RATE_WINDOW_S, max(1.0, now - since))
        return sum(n for _, n in window) / span

    # -- latency ----------------------------------------------------------------------

    def finished(self, queue: str, latency_s: float, now: float) -> None:
        window = self._latency.get(queue)
        if window is None:
            if len(self._latency) >= QUEUES_MAX:
                return
            window = self._latency[queue] = deque(maxlen=LATENCY_MAX)
        window.append((now, latency_s))

    def p95(self, queue: str, now: float) -> tuple[float | None, int]:
        """The 95th percentile latency of the last hour (nearest rank), and the count."""
        window = self._latency.get(queue)
        if not window:
            return None, 0
        _prune(window, now - LATENCY_WINDOW_S)
        return percentile((v for _, v in window), 0.95), len(window)

    def served(self, now: float) -> list[str]:
        """Queues with requests done in the last hour."""
        for window in self._latency.values():
            _prune(window, now - LATENCY_WINDOW_S)
        return [q for q, window in self._latency.items() if window]

    # -- queue depth ------------------------------------------------------------------

    def sample(self, at: float, counts: Iterable[tuple[str, int, int]]) -> DepthSample:
        """Record (queue, queued, active) counts taken at wall-clock time *at*."""
        rows = list(counts)
        deepest = sorted(((q, n) for q, n, _ in rows if n), key=lambda x: (-x[1], x[0]))
        sample = DepthSample(
            at,
            sum(n for _, n, _ in rows),
            sum(a for _, _, a in rows),
            tuple(deepest[:DEPTH_QUEUES]),
        )
        self.depth.append(sample)
        while self.depth and self.depth[0].at < at - DEPTH_WINDOW_S:
            self.depth.popleft()
        return sample


#: (kind, queue, state, count) rows, as :meth:`tssd.db.interface.RequestStoreInterface.counts`
#: returns.
Counts = Callable[[], Awaitable[list[tuple[str, str, str, int]]]]


def depth_of(rows: Iterable[tuple[str, str, str, int]]) -> list[tuple[str, int, int]]:
    """(queue, queued, active) from counts by kind, queue and state."""
    per: dict[str, list[int]] = {}
    for _, queue, state, n in rows:
        if state in ("queued", "active"):
            per.setdefault(queue, [0, 0])[state == "active"] += n
    return [(q, v[0], v[1]) for q, v in sorted(per.items())]


@asynccontextmanager
async def depth_sampler(activity: Activity, counts: Counts) -> AsyncIterator[None]:
    """Sample queue depth every ``activity.depth_every_s`` during the ``async with``."""

    async def loop() -> None:
        while True:
            try:
                activity.sample(time.time(), depth_of(await counts()))
            except DatabaseError as exc:  # a gap in the chart; the next round tries again
                log.warning("status.depth_sample_failed", error=str(exc)[:200])
            await asyncio.sleep(activity.depth_every_s)

    async with running(loop(), "depth-sampler"):
        yield


def percentile(values: Iterable[float], q: float) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def _prune(window: deque[tuple[float, float]] | deque[tuple[float, int]], horizon: float) -> None:
    while window and window[0][0] < horizon:
        window.popleft()

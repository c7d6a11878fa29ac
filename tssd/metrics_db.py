"""Gauges that come from the database, refreshed in the background while tssd serves.

Queue pause flags and the age of each queue's oldest queued request feed the "queue not
moving" alert; the per-tape mount figures of the last day feed the "tape over its mount
budget" alert without a label per tape (deploy/prometheus/tssd-alerts.yml).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import structlog

from tssd.background import running
from tssd.clock import utcnow
from tssd.db.engine import DatabaseError
from tssd.services import Services

log = structlog.get_logger()
REFRESH_S = 15.0


async def refresh(services: Services, seen: set[str] | None = None) -> None:
    """Read the figures once and set the gauges.

    *seen* carries the queue names of earlier rounds, so that a queue that emptied reads
    0 rather than its last age.
    """
    seen = set() if seen is None else seen
    now = utcnow()
    paused, mounts = await services.gauges.pauses_and_mounts(now - timedelta(days=1))
    ages = await services.gauges.oldest_queued()
    m = services.metrics
    seen.update(paused, ages, {services.settings.scheduler.default_queue})
    for name in seen:
        m.queue_paused.labels(name).set(1 if paused.get(name) else 0)
        created = ages.get(name)
        age = (now - created).total_seconds() if created else 0.0
        m.queue_oldest_seconds.labels(name).set(max(0.0, age))
    m.tapes_mounted_24h.set(len(mounts))
    m.tape_mounts_24h_max.set(max(mounts, default=0))
    # getattr: the budget is the scheduler's setting; 0 (or none) means no limit.
    budget = int(getattr(services.settings.scheduler, "mount_budget_per_day", 0) or 0)
    m.tapes_over_budget.set(sum(1 for n in mounts if n > budget) if budget else 0)


@asynccontextmanager
async def database_gauges(services: Services, every_s: float = REFRESH_S) -> AsyncIterator[None]:
    """Keep the database gauges fresh for the duration of the ``async with`` block."""

    async def loop() -> None:
        seen: set[str] = set()
        while True:
            try:
                await refresh(services, seen)
            except DatabaseError as exc:  # the next round tries again; the alert stays
                log.warning("metrics.refresh_failed", error=str(exc))
            await asyncio.sleep(every_s)

    async with running(loop(), "metrics-db"):
        yield

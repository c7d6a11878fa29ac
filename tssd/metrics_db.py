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
from tssd.config.sections import SchedulerSettings
from tssd.db.engine import DatabaseError
from tssd.metrics import Metrics
from tssd.ports.reports import Gauges
from tssd.services import Services

log = structlog.get_logger()
REFRESH_S = 15.0


async def refresh(
    gauges: Gauges, metrics: Metrics, settings: SchedulerSettings, seen: set[str] | None = None
) -> None:
    """Read the figures once and set the gauges.

    *seen* carries the queue names of earlier rounds, so that a queue that emptied reads
    0 rather than its last age.
    """
    seen = set() if seen is None else seen
    now = utcnow()
    paused, mounts = await gauges.pauses_and_mounts(now - timedelta(days=1))
    ages = await gauges.oldest_queued()
    seen.update(paused, ages, {settings.default_queue})
    for name in seen:
        metrics.queue_paused.labels(name).set(1 if paused.get(name) else 0)
        created = ages.get(name)
        age = (now - created).total_seconds() if created else 0.0
        metrics.queue_oldest_seconds.labels(name).set(max(0.0, age))
    metrics.tapes_mounted_24h.set(len(mounts))
    metrics.tape_mounts_24h_max.set(max(mounts, default=0))
    budget = settings.mount_budget_per_day  # 0: no limit
    metrics.tapes_over_budget.set(sum(1 for n in mounts if n > budget) if budget else 0)


@asynccontextmanager
async def database_gauges(services: Services, every_s: float = REFRESH_S) -> AsyncIterator[None]:
    """Keep the database gauges fresh for the duration of the ``async with`` block."""

    scheduler = services.settings.scheduler

    async def loop() -> None:
        seen: set[str] = set()
        while True:
            try:
                await refresh(services.gauges, services.metrics, scheduler, seen)
            except DatabaseError as exc:  # the next round tries again; the alert stays
                log.warning("metrics.refresh_failed", error=str(exc))
            await asyncio.sleep(every_s)

    async with running(loop(), "metrics-db"):
        yield

"""Daemon lifecycle: build the components, serve, and shut down cleanly on a signal.

Shutdown on SIGTERM/SIGINT: stop intake (submits answer 503), let tape sessions in flight
finish within ``scheduler.shutdown_grace_s``, cancel what is left (its requests return to
the queue), dismount, close listeners, backend and database, in that order.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import structlog
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.activity import depth_sampler
from tssd.api.server import start_listeners
from tssd.backends.factory import create_backend
from tssd.backpressure import Backpressure
from tssd.clock import Clock, Offload, RealClock, in_thread
from tssd.cluster.node import cluster_node
from tssd.config import Settings
from tssd.db.admin import AdminStore
from tssd.db.engine import create_engine, is_postgres, session_factory
from tssd.db.retention import retention
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.delivery import FileMovers, reaper
from tssd.endit.service import endit_intake
from tssd.health import Health
from tssd.metrics import Metrics
from tssd.metrics_db import database_gauges
from tssd.ownership import ownership_warnings
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.core import Scheduler
from tssd.scheduler.drives import DriveManager
from tssd.scheduler.intake import Intake
from tssd.scheduler.policy import Policy, get_policy
from tssd.scheduler.sessions import SessionRunner, SinkFactory, SourceFactory
from tssd.services import Services

log = structlog.get_logger()


@dataclass(frozen=True)
class Wiring:
    """What differs between ``tssd serve`` and ``tssd simulate``: time, data and policy."""

    clock: Clock = field(default_factory=RealClock)
    #: None: files on pool disk, confined to the pool roots (tssd.delivery.FileMovers).
    sink_for: SinkFactory | None = None
    source_for: SourceFactory | None = None
    policy: Policy = field(default_factory=lambda: get_policy("tssd"))
    #: Drive/tape health bookkeeping and disk backpressure (off in simulations).
    guards: bool = False
    #: How CPU-bound scheduling work runs (``tssd.clock.inline`` in virtual time).
    offload: Offload = in_thread


@asynccontextmanager
async def build_services(
    settings: Settings, wiring: Wiring | None = None, engine: AsyncEngine | None = None
) -> AsyncIterator[Services]:
    """Every component of a daemon, opened in order and closed in reverse.

    Without *engine* the database of the settings is opened and its schema checked; with
    one (simulation) the caller owns it.
    """
    wiring = wiring or Wiring()
    clock = wiring.clock
    async with AsyncExitStack() as stack:
        if engine is None:
            engine = await stack.enter_async_context(_database(settings))
        sessions = session_factory(engine)
        metrics = Metrics()
        backend = await stack.enter_async_context(create_backend(settings, sessions, clock))
        b = settings.backend
        policy = RetryPolicy(b.retries, b.retry_base_s, b.retry_max_s, max(1, b.max_same_failures))
        retrier = Retrier(policy, metrics, clock)
        store = RequestStore(sessions, postgres=is_postgres(engine))
        store.polls.ttl_s = settings.api.poll_cache_s
        # Before the scheduler reads the queues table: [[queues]] tables win at start.
        await AdminStore(sessions).seed_queues(settings.queues)
        drives = DriveManager(backend, sessions, retrier, metrics, clock)
        # Joins the instances sharing the database before the scheduler requeues its own.
        node = await stack.enter_async_context(cluster_node(settings.cluster, store, backend))
        drives.claims = node.claims
        movers = FileMovers(settings, store)
        runner = SessionRunner(
            store, backend, drives, retrier, metrics, sink_for=wiring.sink_for or movers.sink,
            source_for=wiring.source_for or movers.source, chunk=settings.scheduler.recall_chunk,
            policy=wiring.policy, offload=wiring.offload,
        )  # fmt: skip
        if wiring.guards:
            attach_guards(settings, runner, drives, metrics, store)
        intake = Intake(store, backend, retrier, wiring.policy)
        scheduler = Scheduler(
            settings.scheduler, store, drives, intake, runner, metrics, wiring.policy
        )
        node.on_changes = scheduler.resync_soon
        yield Services(
            settings=settings, store=store, backend=backend, metrics=metrics,
            drives=drives, scheduler=scheduler, database=engine.dialect.name, cluster=node,
        )  # fmt: skip


def attach_guards(
    settings: Settings,
    runner: SessionRunner,
    drives: DriveManager,
    metrics: Metrics,
    store: RequestStore,
) -> None:
    """Hook the reliability guards (tssd/health.py, tssd/backpressure.py) into the sessions."""
    h, bp = settings.health, settings.backpressure
    health = Health(
        drives.sessions, metrics, drive_max_failures=h.drive_max_failures,
        tape_suspect_drives=h.tape_suspect_drives, on_drive_disabled=drives.update_gauge,
    )  # fmt: skip
    runner.health = drives.health = health
    runner.backpressure = Backpressure(
        min_free_bytes=bp.min_free_bytes, min_free_percent=bp.min_free_percent,
        recheck_s=bp.recheck_s, metrics=metrics, on_release=store.notifier.work.set,
    )  # fmt: skip


@asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(
        settings.database_url,
        pool_size=settings.database.pool_size,
        busy_timeout_s=settings.database.busy_timeout_s,
    )
    try:
        revision = await ensure_schema(engine, auto_init=settings.database.auto_init)
        backend = make_url(settings.database_url).get_backend_name()
        log.info("db.ready", database=backend, revision=revision)
        yield engine
    finally:
        await engine.dispose()


async def serve(settings: Settings) -> None:
    """Run the daemon until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    wiring = Wiring(guards=True)
    async with build_services(settings, wiring) as services, AsyncExitStack() as listeners:
        services.warnings.extend(ownership_warnings())
        for warning in services.warnings:
            log.warning("daemon.runs_as_root", warning=warning)
        await services.scheduler.start()
        addresses = await start_listeners(services, listeners)
        task = asyncio.create_task(services.scheduler.run(), name="scheduler")
        # ENDIT directories: started after the scheduler, stopped before it.
        intakes = await listeners.enter_async_context(AsyncExitStack())
        await intakes.enter_async_context(
            endit_intake(settings, services.store, services.backend, services.metrics)
        )
        await intakes.enter_async_context(database_gauges(services))
        services.drives.activity.sample_every(settings.api.status_sample_s)
        await intakes.enter_async_context(
            depth_sampler(services.drives.activity, services.store.counts)
        )
        await intakes.enter_async_context(reaper(settings, services.store, services.metrics))
        db = settings.database
        await intakes.enter_async_context(
            retention(
                services.store.sessions,
                db.retention_days,
                batch=db.retention_batch,
                every_s=db.retention_every_s,
                counted=services.metrics.retention_deleted_total.inc,
            )
        )
        # Start-up's objects (modules, mappings, caches) live as long as the process: out of
        # the cyclic collector's sight, a full collection no longer walks them while holding
        # the interpreter lock, which stalled the event loop for 150-400 ms at a time
        # (benchmarks/admission_load.py).
        gc.freeze()
        log.info(
            "daemon.ready",
            listen=addresses,
            backend=services.backend.name,
            drives=len(services.drives.drives),
        )
        await stop.wait()
        log.info("daemon.stopping", grace_s=settings.scheduler.shutdown_grace_s)
        services.accepting = False
        await intakes.aclose()
        await services.scheduler.stop(settings.scheduler.shutdown_grace_s)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await services.scheduler.shutdown_drives()
    log.info("daemon.stopped")

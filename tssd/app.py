"""Daemon lifecycle: build the components, serve, and shut down cleanly on a signal.

Shutdown on SIGTERM/SIGINT: stop intake (submits answer 503), let tape sessions in flight
finish within ``scheduler.shutdown_grace_s``, cancel what is left (its requests return to
the queue), unload the tapes (every drive at once, for at most
``scheduler.shutdown_unload_s``; the rest stay mounted), close listeners, backend and
database, in that order.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import structlog

from tssd.activity import depth_sampler
from tssd.api.server import start_listeners
from tssd.backends.base import TapeBackend
from tssd.backends.factory import create_backend
from tssd.backpressure import Backpressure
from tssd.clock import Clock, Offload, RealClock, in_thread
from tssd.cluster.node import cluster_node, store_instance, volume_claims
from tssd.config import Settings
from tssd.db.books import BooksOpener, Hooks, open_books, retention
from tssd.db.interface import RequestStoreInterface
from tssd.delivery import FileMovers, file_roots, reaper
from tssd.deployment import backend_warnings
from tssd.endit.service import endit_intake
from tssd.health import Health
from tssd.metrics import Metrics
from tssd.metrics_db import database_gauges
from tssd.ownership import ownership_warnings
from tssd.ports.health import HealthBook
from tssd.retry import Retrier, RetryPolicy
from tssd.safepath import HeldRoots
from tssd.scheduler.choose import Chooser
from tssd.scheduler.core import Scheduler
from tssd.scheduler.cost import profile_of
from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.drives import DriveManager
from tssd.scheduler.intake import Intake
from tssd.scheduler.planner import Planner
from tssd.scheduler.policy import Policy, get_policy
from tssd.scheduler.sessions import SessionRunner, SinkFactory, SourceFactory
from tssd.scheduler.tiers import PriorityTiers
from tssd.services import Services

log = structlog.get_logger()

FinishedListener = Callable[[Sequence[int]], object]


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
    #: Called with the ids of requests that just finished (``tssd simulate`` counts them).
    on_finished: tuple[FinishedListener, ...] = ()


@asynccontextmanager
async def build_services(
    settings: Settings, wiring: Wiring | None = None, books: BooksOpener | None = None
) -> AsyncIterator[Services]:
    """Every component of a daemon, opened in order and closed in reverse.

    The composition root: each component gets its collaborators in its constructor, and
    whatever must be closed is entered on one exit stack. The implementations of the
    ports come from *books* (:mod:`tssd.db.books`), by default those of
    ``database.url``: in SQL, its schema checked, or in memory for ``memory://``.
    """
    opener = books or functools.partial(open_books, settings)
    async with AsyncExitStack() as stack:
        yield await _compose(settings, wiring or Wiring(), opener, stack)


async def _compose(
    settings: Settings, wiring: Wiring, opener: BooksOpener, stack: AsyncExitStack
) -> Services:
    clock = wiring.clock
    metrics = Metrics()
    # The cost model's per-tape index drops requests as they finish, wherever they do.
    planner = Planner()
    listeners = ((planner.take,) if wiring.policy.cost_model else ()) + wiring.on_finished
    hooks = Hooks(
        finished=listeners, outcomes=metrics.ended,
        analysed=lambda table: metrics.db_analyze_total.labels(table).inc(),
        instance=lambda shareable: store_instance(settings.cluster, postgres=shareable),
    )  # fmt: skip
    books = await stack.enter_async_context(opener(hooks))
    backend = await stack.enter_async_context(create_backend(settings, books.catalogs, clock))
    b = settings.backend
    policy = RetryPolicy(b.retries, b.retry_base_s, b.retry_max_s, max(1, b.max_same_failures))
    retrier = Retrier(policy, metrics, clock)
    # Requeues waiting for their backoff end with the daemon: start-up requeues them.
    stack.callback(retrier.cancel_waiting)
    store, postgres = books.store, books.shareable
    # A background recount or a running ANALYZE, closed before the backend.
    stack.push_async_callback(books.upkeep.close)
    # Before the scheduler reads the queues table: [[queues]] tables win at start.
    await books.admin.seed_queues(settings.queues)
    claims = volume_claims(settings.cluster, books.cluster, postgres=postgres)
    drives = DriveManager(
        backend, books.mounts, retrier, metrics, clock, claims=claims,
        health=_health(settings, books.health, metrics) if wiring.guards else None,
    )  # fmt: skip
    roots = None
    if wiring.sink_for is None or wiring.source_for is None:
        # Resolved and opened once, now: a root retargeted later leads nowhere new.
        roots = HeldRoots(file_roots(settings))
        stack.callback(roots.close)
    scheduler = _scheduler(
        settings, wiring, store, backend, drives, retrier, metrics, planner, roots
    )
    # Joins the instances sharing the database before the scheduler requeues its own
    # (Scheduler.start); builds nothing that needs the scheduler started.
    node = await stack.enter_async_context(
        cluster_node(
            settings.cluster,
            books.cluster,
            store,
            backend,
            postgres=postgres,
            claims=claims,
            on_changes=scheduler.resync_soon,
        )
    )
    return Services(
        settings=settings, store=store, backend=backend, metrics=metrics, drives=drives,
        scheduler=scheduler, database=books.database, cluster=node, pool_roots=roots,
        history=books.history, retention=books.retention, glance=books.glance,
        admin=books.admin, reports=books.reports, gauges=books.gauges, upkeep=books.upkeep,
    )  # fmt: skip


def _scheduler(
    settings: Settings,
    wiring: Wiring,
    store: RequestStoreInterface,
    backend: TapeBackend,
    drives: DriveManager,
    retrier: Retrier,
    metrics: Metrics,
    planner: Planner,
    roots: HeldRoots | None,
) -> Scheduler:
    """The scheduler and its parts: chooser, drive sessions, tiers, runner, intake."""
    s, policy, clock = settings.scheduler, wiring.policy, wiring.clock
    sessions = DriveSessions(drives.drives, clock)
    chooser = Chooser(
        s, store.scheduling, store.queue_settings, drives, profile_of(backend), clock,
        planner=planner, drive_sessions=sessions,
    )  # fmt: skip
    if policy.cost_model:
        tiers = PriorityTiers(
            sessions, planner, interrupt_after_s=s.urgent_batch_s,
            urgent_within_s=s.urgent_within_s, urgent_target_s=s.urgent_target_s,
            queue_targets=chooser.targets,
        )  # fmt: skip
        rao, urgent_elsewhere = s.rao, chooser.urgent_late
    else:
        # No per-tape index: no request interrupts a pass, reads in position order.
        tiers, rao, urgent_elsewhere = PriorityTiers(sessions), "off", _never
    sink_for, source_for = wiring.sink_for, wiring.source_for
    if sink_for is None or source_for is None:
        movers = FileMovers(settings, store, roots)
        sink_for, source_for = sink_for or movers.sink, source_for or movers.source
    runner = SessionRunner(
        store, backend, drives, retrier, metrics, tiers=tiers,
        sink_for=sink_for, source_for=source_for,
        chunk=s.recall_chunk, policy=policy, rao=rao, offload=wiring.offload,
        urgent_elsewhere=urgent_elsewhere,
        backpressure=_backpressure(settings, metrics, store) if wiring.guards else None,
    )  # fmt: skip
    # Located recalls join the index with their arrival on the scheduler's clock.
    intake = Intake(store, backend, retrier, policy, planner=tiers.planner, now=clock.now)
    return Scheduler(
        s, store, drives, intake, runner, metrics, policy, chooser=chooser,
        sessions=sessions, work=store.work,
    )  # fmt: skip


def _purged(services: Services, n: int) -> None:
    services.metrics.retention_deleted_total.inc(n)
    services.upkeep.changed(n, "requests", "request_events")


def _never(volume: str) -> bool:
    return False


def _health(settings: Settings, book: HealthBook, metrics: Metrics) -> Health:
    """Drive and tape health bookkeeping (tssd/health.py), held by the drive manager."""
    h = settings.health
    return Health(
        book, metrics, drive_max_failures=h.drive_max_failures,
        tape_suspect_drives=h.tape_suspect_drives,
    )  # fmt: skip


def _backpressure(
    settings: Settings, metrics: Metrics, store: RequestStoreInterface
) -> Backpressure:
    """Disk backpressure (tssd/backpressure.py): recalls into full file systems wait."""
    bp = settings.backpressure
    return Backpressure(
        min_free_bytes=bp.min_free_bytes, min_free_percent=bp.min_free_percent,
        recheck_s=bp.recheck_s, metrics=metrics, on_release=store.work.nudge,
    )  # fmt: skip


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
        simulated = backend_warnings(settings.backend.type, settings.home_path)
        for warning in simulated:
            log.warning("daemon.simulated_backend", warning=warning, home=str(settings.home_path))
        services.warnings.extend(simulated)
        await services.scheduler.start()
        addresses = await start_listeners(services, listeners)
        task = asyncio.create_task(services.scheduler.run(), name="scheduler")
        # ENDIT directories: started after the scheduler, stopped before it.
        intakes = await listeners.enter_async_context(AsyncExitStack())
        await intakes.enter_async_context(
            endit_intake(
                settings, services.store, services.history, services.backend, services.metrics
            )
        )
        await intakes.enter_async_context(database_gauges(services))
        services.drives.activity.sample_every(settings.api.status_sample_s)
        await intakes.enter_async_context(
            depth_sampler(services.drives.activity, services.store.counts)
        )
        await intakes.enter_async_context(
            reaper(
                settings, services.store, services.history, services.metrics, services.pool_roots
            )
        )
        db = settings.database
        await intakes.enter_async_context(
            retention(
                services.retention,
                db.retention_days,
                batch=db.retention_batch,
                every_s=db.retention_every_s,
                counted=functools.partial(_purged, services),
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
        services.stop_accepting()
        await intakes.aclose()
        await services.scheduler.stop(settings.scheduler.shutdown_grace_s)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await services.scheduler.shutdown_drives(settings.scheduler.shutdown_unload_s)
    log.info("daemon.stopped")

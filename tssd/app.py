"""Daemon lifecycle: build the components, serve, and shut down cleanly on a signal.

Shutdown on SIGTERM/SIGINT: stop intake (submits answer 503), let tape sessions in flight
finish within ``scheduler.shutdown_grace_s``, cancel what is left (its requests return to
the queue), dismount, close listeners, backend and database, in that order.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import structlog
from sqlalchemy.engine import make_url

from tssd.api.server import start_listeners
from tssd.backends.base import Sink, Source
from tssd.backends.factory import create_backend
from tssd.clock import Clock, RealClock
from tssd.config import Settings
from tssd.db.engine import create_engine, is_postgres, session_factory
from tssd.db.models import Request
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.files import FileSink, FileSource
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.core import Scheduler
from tssd.scheduler.drives import DriveManager
from tssd.scheduler.intake import Intake
from tssd.scheduler.sessions import SessionRunner
from tssd.services import Services

log = structlog.get_logger()


def file_sink(request: Request) -> Sink:
    return FileSink(Path(request.path or ""))


def file_source(request: Request) -> Source:
    return FileSource(Path(request.path or ""), request.size or 0)


@asynccontextmanager
async def build_services(settings: Settings, clock: Clock | None = None) -> AsyncIterator[Services]:
    """Every component of a daemon, opened in order and closed in reverse."""
    clock = clock or RealClock()
    async with AsyncExitStack() as stack:
        engine = create_engine(
            settings.database_url,
            pool_size=settings.database.pool_size,
            busy_timeout_s=settings.database.busy_timeout_s,
        )
        stack.push_async_callback(engine.dispose)
        revision = await ensure_schema(engine, auto_init=settings.database.auto_init)
        log.info(
            "db.ready",
            database=make_url(settings.database_url).get_backend_name(),
            revision=revision,
        )
        sessions = session_factory(engine)
        metrics = Metrics()
        backend = await stack.enter_async_context(create_backend(settings, sessions, clock))
        b = settings.backend
        retrier = Retrier(RetryPolicy(b.retries, b.retry_base_s, b.retry_max_s), metrics, clock)
        store = RequestStore(sessions, postgres=is_postgres(engine))
        drives = DriveManager(backend, sessions, retrier, metrics, clock)
        runner = SessionRunner(
            store,
            backend,
            drives,
            retrier,
            metrics,
            sink_for=file_sink,
            source_for=file_source,
            chunk=settings.scheduler.recall_chunk,
        )
        scheduler = Scheduler(
            settings.scheduler, store, drives, Intake(store, backend, retrier), runner, metrics
        )
        yield Services(
            settings=settings,
            store=store,
            backend=backend,
            metrics=metrics,
            drives=drives,
            scheduler=scheduler,
            database=engine.dialect.name,
        )


async def serve(settings: Settings) -> None:
    """Run the daemon until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with build_services(settings) as services, AsyncExitStack() as listeners:
        await services.scheduler.start()
        addresses = await start_listeners(services, listeners)
        task = asyncio.create_task(services.scheduler.run(), name="scheduler")
        log.info(
            "daemon.ready",
            listen=addresses,
            backend=services.backend.name,
            drives=len(services.drives.drives),
        )
        await stop.wait()
        log.info("daemon.stopping", grace_s=settings.scheduler.shutdown_grace_s)
        services.accepting = False
        await services.scheduler.stop(settings.scheduler.shutdown_grace_s)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await services.scheduler.shutdown_drives()
    log.info("daemon.stopped")

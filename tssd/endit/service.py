"""The ENDIT intake of a daemon: one worker per configured directory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

from tssd.backends.base import TapeBackend
from tssd.clock import RealClock
from tssd.config import EnditDirectory, Settings
from tssd.db.interface import RequestStoreInterface
from tssd.endit.context import DirContext
from tssd.endit.dirs import EnditPaths
from tssd.endit.worker import DirectoryWorker
from tssd.errors import ConfigError
from tssd.metrics import Metrics
from tssd.ports.history import RequestHistory
from tssd.retry import Retrier, RetryPolicy

log = structlog.get_logger()


def _paths(directory: EnditDirectory, seen: set[Path], metrics: Metrics) -> EnditPaths:
    """The directory resolved once and held open: later symlink swaps lead nowhere."""
    if not directory.path:
        raise ConfigError("endit.directories: every directory needs a path")
    base = Path(directory.path).expanduser().resolve()
    if base in seen:
        raise ConfigError(f"endit.directories: {base} is listed twice")
    seen.add(base)

    def refused(subdir: str) -> None:
        metrics.endit.dirs_refused.labels(directory=str(base), subdir=subdir).inc()

    return EnditPaths(base, on_refused=refused)


@asynccontextmanager
async def endit_intake(
    settings: Settings,
    store: RequestStoreInterface,
    history: RequestHistory,
    backend: TapeBackend,
    metrics: Metrics,
) -> AsyncIterator[list[DirectoryWorker]]:
    """Serve every configured ENDIT directory until the context exits."""
    b = settings.backend
    retrier = Retrier(RetryPolicy(b.retries, b.retry_base_s, b.retry_max_s), metrics, RealClock())
    seen: set[Path] = set()
    # Opening a directory may block (NFS): off the event loop.
    opened = [await asyncio.to_thread(_paths, d, seen, metrics) for d in settings.endit.directories]
    workers = [
        DirectoryWorker(
            DirContext(
                store,
                history,
                paths,
                d,
                settings.endit,
                d.queue or settings.scheduler.default_queue,
                metrics.endit,
                settings.storage_classes,
            ),
            backend,
            retrier,
        )
        for d, paths in zip(settings.endit.directories, opened, strict=True)
    ]
    tasks = [asyncio.create_task(w.run(), name=f"endit:{w.directory}") for w in workers]
    try:
        yield workers
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for paths in opened:
            paths.close()
        if workers:
            log.info("endit.stopped", directories=len(workers))

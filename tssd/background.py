"""Background loops that live for one ``async with`` block.

The daemon's periodic jobs (retention, the database-backed metrics, the delivery reaper,
the queue-depth sampler) each run as one task beside the API and the scheduler, entered
on the application's exit stack so that shutdown cancels them in reverse order. A loop
that ends by an error it did not expect is logged the moment it dies, with its name:
waiting for the shutdown to re-raise it would leave an operator a daemon that silently
stopped purging or measuring.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import structlog

log = structlog.get_logger()


def _report(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("background.died", task=task.get_name(), error=repr(exc)[:200])


@asynccontextmanager
async def running(job: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """Run *job* as the task *name* for the duration of the block.

    On exit the task is cancelled and awaited; it never raises into the block's exit,
    whatever it ended with (an error was logged as ``background.died`` when it happened).
    """
    task = asyncio.create_task(job, name=name)
    task.add_done_callback(_report)
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

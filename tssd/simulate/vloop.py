"""Virtual time for the real asyncio code, and a SQLite driver that never leaves the loop.

:class:`VirtualTimeLoop` is an ordinary selector event loop whose clock only moves when
nothing is runnable: then it jumps straight to the next timer. Every ``asyncio.sleep``,
``wait_for`` timeout and ``call_later`` therefore runs in simulated seconds, and ten hours
of tape work take as long as the computation they need.

That is only deterministic if no work happens outside the loop, where the loop cannot see
it. aiosqlite runs each statement on a worker thread; :func:`inline_sqlite_creator` gives
SQLAlchemy's aiosqlite dialect a connection whose statements run inline instead, so a
database call is finished before the loop looks at its clock again.
"""

from __future__ import annotations

import asyncio
import selectors
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")


class Deadlock(RuntimeError):
    """Nothing is runnable and no timer is set: the simulation cannot make progress."""


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            # No timer: only a worker thread (file reading before the campaign starts) can
            # still make progress, so wait for it in real time.
            events = super().select(self._loop.stuck_after_s)
            if not events:
                raise Deadlock("no runnable task, no timer, no I/O: the simulation is stuck")
            return events
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is simulated seconds since the start."""

    def __init__(self, stuck_after_s: float = 300.0) -> None:
        self._virtual_now = 0.0
        #: Real seconds to wait for a worker thread before declaring the run stuck.
        self.stuck_after_s = stuck_after_s
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += max(0.0, seconds)


def run_virtual(main: Callable[[], Awaitable[T]], *, stuck_after_s: float = 300.0) -> T:
    """Run ``main()`` to completion on a fresh virtual-time loop."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(stuck_after_s)) as runner:
        return runner.run(_call(main))


async def _call(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


class _InlineQueue:
    """Stands in for aiosqlite's queue to its worker thread: runs each call at once."""

    def put_nowait(self, item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            return
        if future is not None and not future.done():
            future.set_result(result)


class InlineConnection(aiosqlite.Connection):
    """An aiosqlite connection that executes in the calling thread (the event loop)."""

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(connector, iter_chunk_size=64)
        self._tx = _InlineQueue()  # type: ignore[assignment]

    def __await__(self) -> Any:
        # No worker thread to start: _connect runs the connector through the inline queue.
        return self._connect().__await__()


def inline_sqlite_creator(database: str) -> Callable[[], Awaitable[InlineConnection]]:
    """An ``async_creator`` for ``create_async_engine('sqlite+aiosqlite://', ...)``."""

    async def create() -> InlineConnection:
        def connector() -> sqlite3.Connection:
            return sqlite3.connect(database, isolation_level=None, check_same_thread=False)

        connection = InlineConnection(connector)
        await connection._connect()
        return connection

    return create

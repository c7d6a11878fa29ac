"""One thread per SP session: every API call of a session runs on that session's thread.

The client API binds a session handle to the thread that signed it on (DSM_MULTITHREAD
lets several threads each hold their own), and its calls block for as long as a tape
mount takes. So each session owns one thread, the event loop hands it calls and awaits
their futures; ctypes releases the interpreter lock for the duration of each foreign
call, so the loop runs on while a thread waits for the server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SessionThread:
    """A single worker thread that runs a session's calls in the order they are made."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"sp-{self.name}"
            )
        return self._pool

    async def call(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(*args)`` on the thread; the event loop waits without blocking.

        A cancelled caller does not interrupt the call (no foreign call can be), but the
        next call queued waits for it: the session's calls never overlap.
        """
        future = self._executor().submit(func, *args)
        return await asyncio.wrap_future(future)

    def shutdown(self) -> None:
        """Let queued calls finish and the thread end; does not wait. Never raises."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

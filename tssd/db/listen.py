"""What other instances did to the queue: PostgreSQL ``LISTEN tssd_work, tssd_done``.

Triggers on ``requests`` (migration 0003) notify ``tssd_work`` whenever a request becomes
queued or a queued one is located on a tape, whoever wrote it (a submit or a locate at
another instance, an operator retry, a reaper's requeue), and ``tssd_done`` with the
request's id when one finishes, so that this instance's poll cache forgets it at once.
The listener holds one connection of its own; if it is lost (the database failing over)
the heartbeat reconnects it, and the periodic resync of the scheduler covers what was
announced meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = structlog.get_logger()
CHANNEL = "tssd_work"
DONE_CHANNEL = "tssd_done"


class WorkListener:
    """Counts ``tssd_work`` notifications since the last :meth:`take` (the
    :class:`~tssd.ports.cluster.ClusterSignals` of PostgreSQL)."""

    def __init__(self, engine: AsyncEngine, on_done: Callable[[int], None] | None = None) -> None:
        self._engine = engine
        self._on_done = on_done
        self._conn: AsyncConnection | None = None
        #: The asyncpg connection under it (asyncpg ships no type information).
        self._driver: Any = None
        self.pending = 0

    async def ensure(self) -> None:
        """Connect and listen unless already listening."""
        if self._driver is not None and not self._driver.is_closed():
            return
        await self.close()
        self._conn = await self._engine.connect()
        self._driver = (await self._conn.get_raw_connection()).driver_connection
        await self._driver.add_listener(CHANNEL, self._notified)
        await self._driver.add_listener(DONE_CHANNEL, self._done)
        # What was announced while we were not listening is unknown: assume something.
        self.pending += 1
        log.info("cluster.listening", channel=CHANNEL)

    def _notified(self, *_args: Any) -> None:
        self.pending += 1

    def _done(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if self._on_done is not None and payload.isdigit():
            self._on_done(int(payload))

    def take(self) -> bool:
        """Whether anything was announced since the last call."""
        seen, self.pending = self.pending, 0
        return seen > 0

    async def close(self) -> None:
        conn, driver, self._conn, self._driver = self._conn, self._driver, None, None
        if conn is None:
            return
        try:
            if driver is not None and not driver.is_closed():
                # Back into the pool it goes: without our listeners.
                await driver.remove_listener(CHANNEL, self._notified)
                await driver.remove_listener(DONE_CHANNEL, self._done)
        finally:
            await conn.close()


class QuietSignals:
    """The :class:`~tssd.ports.cluster.ClusterSignals` of a database nobody else writes
    (SQLite, memory): nothing is ever announced."""

    async def ensure(self) -> None:
        return None

    def take(self) -> bool:
        return False

    async def close(self) -> None:
        return None

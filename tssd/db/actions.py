"""What both request stores do the same way, written once on their own ``get``, ledger
(:mod:`tssd.db.ledger`), ``notifier`` and ``work``: an operator's cancel and retry, a
client's wait.

:class:`tssd.db.store.RequestStore` and the in-memory :class:`tssd.db.memory.MemoryStore`
inherit these: cancel and retry are the ledger's transition plus the answer an operator
needs when it did not apply; wait reads the request when woken by a transition.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sequence
from typing import Protocol

from tssd.db.ledger import Ledger
from tssd.db.notifier import Notifier
from tssd.domain import Request, State
from tssd.errors import Conflict
from tssd.lifecycle import Transition, sources
from tssd.work import WorkSignal


class Transitions(Protocol):
    """What the actions need of their store: the ledger's cancel and retry."""

    @property
    def notifier(self) -> Notifier: ...

    @property
    def work(self) -> WorkSignal: ...

    async def get(self, request_id: int) -> Request: ...

    def cancel(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]: ...

    def retry(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]: ...


class OperatorActions(Ledger):
    """``cancel_request``, ``retry_request`` and ``wait`` for a store with ``get``, the
    ledger's transitions, ``notifier`` and ``work``."""

    async def cancel_request(
        self: Transitions, request_id: int, reason: str = "cancelled by operator"
    ) -> Request:
        """Cancel an open request; :class:`Conflict` if it had already ended."""
        changed = await self.cancel([request_id], reason)
        row = await self.get(request_id)
        if not changed:
            raise Conflict(f"request {request_id} is already {row.state}")
        return row

    async def retry_request(self: Transitions, request_id: int) -> Request:
        """Queue a failed or cancelled request again; :class:`Conflict` if it is in
        another state or another open request of its key exists."""
        row = await self.get(request_id)
        if row.state not in sources(Transition.RETRY):
            raise Conflict(f"request {request_id} is {row.state}: only failed or cancelled")
        try:
            changed = await self.retry([request_id], "retried by operator")
        except Conflict:
            raise Conflict(f"another open {row.kind} request exists for {row.key}") from None
        if not changed:
            raise Conflict(f"request {request_id} changed state meanwhile")
        self.work.nudge()
        return await self.get(request_id)

    async def wait(self: Transitions, request_id: int, timeout: float) -> tuple[Request, bool]:
        """Return when the request is finished or *timeout* seconds have passed.

        The store is read once at the start and once when woken: by this process's own
        transitions, or (several instances) by ``NOTIFY tssd_done`` through
        :class:`~tssd.db.listen.WorkListener`. No periodic re-read: 4,000 waiters
        re-reading every 2 s saturated the daemon (docs/reliability.md).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        event = self.notifier.watch(request_id)
        try:
            while True:
                row = await self.get(request_id)
                remaining = deadline - loop.time()
                if not State(row.state).is_open or remaining <= 0:
                    return row, not State(row.state).is_open
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout=remaining)
        finally:
            self.notifier.unwatch(request_id, event)

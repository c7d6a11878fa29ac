"""What both request stores do the same way, written once on their own ``get``,
``transition``, ``notifier`` and ``work``: an operator's cancel and retry, a client's wait.

:class:`tssd.db.store.RequestStore` and the in-memory :class:`tssd.db.memory.MemoryStore`
inherit these: cancel and retry are a conditional transition plus the answer an operator
needs when it did not apply; wait reads the request when woken by a transition.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError

from tssd.db.models import utcnow
from tssd.db.notifier import Notifier
from tssd.domain import OPEN_STATES, Request, State
from tssd.errors import Conflict
from tssd.work import WorkSignal


class Transitions(Protocol):
    """What the actions need of their store."""

    @property
    def notifier(self) -> Notifier: ...

    @property
    def work(self) -> WorkSignal: ...

    async def get(self, request_id: int) -> Request: ...

    def transition(
        self,
        ids: Sequence[int],
        from_states: Iterable[str],
        to_state: State,
        *,
        reason: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> Awaitable[list[int]]: ...


class OperatorActions:
    """``cancel``, ``retry`` and ``wait`` for a store with ``get``, ``transition``,
    ``notifier`` and ``work``."""

    async def cancel(
        self: Transitions, request_id: int, reason: str = "cancelled by operator"
    ) -> Request:
        """Cancel an open request; :class:`Conflict` if it had already ended."""
        changed = await self.transition(
            [request_id],
            OPEN_STATES,
            State.CANCELLED,
            reason=reason,
            values={"error": reason, "finished_at": utcnow()},
        )
        row = await self.get(request_id)
        if not changed:
            raise Conflict(f"request {request_id} is already {row.state}")
        return row

    async def retry(self: Transitions, request_id: int) -> Request:
        """Queue a failed or cancelled request again; :class:`Conflict` if it is in
        another state or another open request of its key exists."""
        row = await self.get(request_id)
        if row.state not in (State.FAILED, State.CANCELLED):
            raise Conflict(f"request {request_id} is {row.state}: only failed or cancelled")
        try:
            changed = await self.transition(
                [request_id],
                (State.FAILED, State.CANCELLED),
                State.QUEUED,
                reason="retried by operator",
                values={"error": None, "error_code": None, "finished_at": None, "attempts": 0},
            )
        except IntegrityError:
            raise Conflict(f"another open {row.kind} request exists for {row.key}") from None
        if not changed:
            raise Conflict(f"request {request_id} changed state meanwhile")
        self.work.nudge()
        return await self.get(request_id)

    async def wait(self: Transitions, request_id: int, timeout: float) -> tuple[Request, bool]:
        """Return when the request is finished or *timeout* seconds have passed.

        The store is read once at the start and once when woken: by this process's own
        transitions, or (several instances) by ``NOTIFY tssd_done`` through
        :class:`~tssd.cluster.listen.WorkListener`. No periodic re-read: 4,000 waiters
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

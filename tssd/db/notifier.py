"""In-process wake-ups: waiters on a request, listeners of finished requests (the
scheduler's own wake-up is its work signal, :mod:`tssd.work`).

Other tssd instances' finishes arrive through ``tssd.db.listen`` (NOTIFY tssd_done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from tssd.domain import State

#: Told the (kind, queue) of each request that just ended ``done``, ``failed`` or
#: ``cancelled`` in this process, and which: ``tssd_requests_total`` counts there, so that
#: every way a request ends is counted (intake's failures and cancels were not).
Outcomes = Callable[[State, Sequence[tuple[str, str]]], None]
#: The states whose entries :data:`Outcomes` hears of (abandoned follows done: counted).
COUNTED = frozenset({State.DONE, State.FAILED, State.CANCELLED})


class Notifier:
    """Wakes waiters when requests finish (here, or elsewhere as the cluster listener hears)."""

    def __init__(self, listeners: Iterable[Callable[[Sequence[int]], object]] = ()) -> None:
        self._waiters: dict[int, set[asyncio.Event]] = {}
        #: Called, in order, with the ids of requests that just finished (the scheduler's
        #: planner, simulation bookkeeping).
        self.listeners = tuple(listeners)

    def watch(self, request_id: int) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.setdefault(request_id, set()).add(event)
        return event

    def unwatch(self, request_id: int, event: asyncio.Event) -> None:
        events = self._waiters.get(request_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiters[request_id]

    def finished(self, ids: Sequence[int]) -> None:
        for listener in self.listeners:
            listener(ids)
        for request_id in ids:
            for event in self._waiters.get(request_id, ()):
                event.set()

"""In-process wake-ups: waiters on a request, listeners of finished requests (the
scheduler's own wake-up is its work signal, :mod:`tssd.work`).

Other tssd instances' finishes arrive through ``tssd.cluster.listen`` (NOTIFY tssd_done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence


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

"""The request history and the retention purge on the in-memory store's dictionaries.

:class:`MemoryHistory` and :class:`MemoryRetention` are
:class:`tssd.ports.history.RequestHistory` and :class:`~tssd.ports.history.Retention`
for a :class:`tssd.db.memory.MemoryStore`: they read (and the purge deletes) the store's
own rows and events, so they see every change the store makes. Each call runs without an
``await`` inside, so on one event loop it is atomic, as the SQL transaction is.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tssd.db.views import request_of
from tssd.domain import OPEN_STATES, TERMINAL_STATES, Kind, Request, State
from tssd.ports.history import Purged, StateEvent, Unclaimed

if TYPE_CHECKING:
    from tssd.db.lookups import SqlHistory
    from tssd.db.memory import MemoryStore
    from tssd.db.retention import SqlRetention
    from tssd.ports.history import RequestHistory, Retention

_TRANSFERS = (Kind.RECALL.value, Kind.MIGRATE.value)


class MemoryHistory:
    """Reads of *store*'s requests and events (the port's docstrings state each)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(self._store._rows.values())

    async def requests_by_id(self, ids: Sequence[int]) -> list[Request]:
        rows = self._store._rows
        return [request_of(rows[i]) for i in dict.fromkeys(ids) if i in rows]

    async def open_transfers_under(
        self, base: str, ids: Sequence[int] | None = None
    ) -> list[Request]:
        rows = self._rows() if ids is None else self._some(ids)
        return [
            request_of(v)
            for v in rows
            if v["state"] in OPEN_STATES
            and v["kind"] in _TRANSFERS
            and v["path"] is not None
            and v["path"].startswith(base)
        ]

    def _some(self, ids: Sequence[int]) -> Iterator[dict[str, Any]]:
        rows = self._store._rows
        return (rows[i] for i in dict.fromkeys(ids) if i in rows)

    async def last_event_id(self) -> int:
        log = self._store._log
        return log[-1].id if log else 0

    async def events_after(self, after: int) -> list[StateEvent]:
        log = self._store._log
        start = bisect.bisect_right(log, after, key=lambda e: e.id)
        return [StateEvent(e.id, e.request_id, e.to_state) for e in log[start:]]

    async def unclaimed_recalls(
        self, delivery: str, before: datetime, limit: int
    ) -> list[Unclaimed]:
        found = (
            Unclaimed(v["id"], v["path"], v["pnfsid"], v["queue"])
            for v in self._rows()
            if v["delivery"] == delivery
            and v["state"] == State.DONE
            and v["kind"] == Kind.RECALL
            and _before(v["finished_at"], before)
        )
        return [u for _, u in zip(range(max(limit, 0)), found, strict=False)]

    async def all_recalls(self) -> list[Request]:
        return [request_of(v) for v in self._rows() if v["kind"] == Kind.RECALL]


class MemoryRetention:
    """The purge of *store*'s finished requests (tssd.db.retention's loop drives it)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def purge_batch(self, before: datetime, batch: int) -> Purged:
        finished = [
            v
            for v in self._store._rows.values()
            if v["state"] in TERMINAL_STATES and _before(v["finished_at"], before)
        ]
        finished.sort(key=lambda v: v["finished_at"])
        chosen = [v["id"] for v in finished[: max(batch, 0)]]
        self._store._forget(chosen)
        return Purged(len(chosen), len(chosen))


def _before(at: datetime | None, cutoff: datetime) -> bool:
    """``at < cutoff`` as SQL compares: never true of NULL."""
    return at is not None and at < cutoff


if TYPE_CHECKING:

    def _conforms(store: MemoryStore, sql: SqlHistory, purge: SqlRetention) -> None:
        """For mypy: the memory and SQL classes have the ports' signatures."""
        histories: list[RequestHistory] = [MemoryHistory(store), sql]
        purges: list[Retention] = [MemoryRetention(store), purge]
        del histories, purges

"""Reads of requests and their events by the components around the scheduler, and the
retention purge of finished ones.

:class:`RequestHistory` is what ENDIT's directory workers, the delivery reaper and the
simulator read: requests by id or by path, the request events (each state change) since
an event id, the recalls whose part file waits to be claimed. :class:`Retention` deletes
old finished requests with their events, one batch at a time; the periodic loop around
it is :func:`tssd.db.retention.retention`.

``tssd/db/history.py`` implements both in SQL, ``tssd/db/memory_history.py`` on the
in-memory store's dictionaries; ``tests/integration/test_history_contract.py`` holds
them to one suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from tssd.domain import Request


@dataclass(frozen=True, slots=True)
class StateEvent:
    """One request event (a state change), as the ENDIT workers follow them."""

    #: Increasing in the order the events were recorded (the ``request_events`` id).
    id: int
    request_id: int
    #: The state the request moved to.
    to_state: str


@dataclass(frozen=True, slots=True)
class Unclaimed:
    """A done recall whose part file waits for a pool call to claim it."""

    id: int
    path: str | None
    pnfsid: str | None
    queue: str


@dataclass(frozen=True, slots=True)
class Purged:
    """The outcome of one retention batch."""

    #: Requests the batch chose (finished before the cutoff, oldest first).
    chosen: int
    #: Of those, the ones deleted (a request reopened meanwhile stays).
    deleted: int


@runtime_checkable
class RequestHistory(Protocol):
    """Reads of requests and request events; each is one read, none changes anything.

    Requests come back as :class:`tssd.domain.Request` records, in no particular order
    unless stated.
    """

    async def requests_by_id(self, ids: Sequence[int]) -> list[Request]:
        """The current records of *ids*, those that exist (unknown ids are left out)."""
        ...

    async def open_transfers_under(
        self, base: str, ids: Sequence[int] | None = None
    ) -> list[Request]:
        """Open (queued or active) recalls and migrations whose path starts with *base*,
        taken literally (no wildcard); of *ids* only, when given."""
        ...

    async def last_event_id(self) -> int:
        """The id of the newest request event so far; 0 when there is none."""
        ...

    async def events_after(self, after: int) -> list[StateEvent]:
        """The request events whose id is above *after*."""
        ...

    async def unclaimed_recalls(
        self, delivery: str, before: datetime, limit: int
    ) -> list[Unclaimed]:
        """At most *limit* done recalls with delivery *delivery* that finished before
        *before*."""
        ...

    async def all_recalls(self) -> list[Request]:
        """Every recall request, whatever its state (a simulation's outcome)."""
        ...


@runtime_checkable
class Retention(Protocol):
    """The deletion of finished requests some time after they finished."""

    async def purge_batch(self, before: datetime, batch: int) -> Purged:
        """Choose the (at most *batch*) oldest requests finished (done, failed, cancelled
        or abandoned) before *before* and delete them with all their events, at once.

        Open requests are never deleted, even one reopened between the choice and the
        deletion. ``chosen`` below *batch* means nothing older is left.
        """
        ...

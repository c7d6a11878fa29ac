"""The scheduler's gateway to the queue: the reads, claims and settings it needs of a
request store, and the views of the store each part of the scheduler receives.

:class:`tssd.db.store.RequestStore` (SQLite, PostgreSQL) and
:class:`tssd.db.memory.MemoryStore` implement them all; the contract suites
(``tests/integration/test_store_contract*.py``) run one set of tests on the three.
Each consumer is typed on the narrowest view it uses, so that either store runs it:

- :class:`SessionLedger` -- :class:`tssd.scheduler.sessions.SessionRunner`: the ledger's
  transitions and the claims of a tape session;
- :class:`IntakeLedger` -- :class:`tssd.scheduler.intake.Intake`: the transitions, the
  candidate reads and claims, and recording where recalls' copies are;
- :class:`SchedulerStore` -- :class:`tssd.scheduler.core.Scheduler`: the gateway, the queue
  settings, the counts and the start-up requeue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tssd.domain import Request
from tssd.lifecycle import RequestLedger

#: (kind, queue, state, count), as :meth:`SchedulerStore.counts` returns them.
CountRow = tuple[str, str, str, int]
#: A queued, located recall as the planner loads it: id, volume, position, size,
#: priority, queue, created_at.
PendingRow = tuple[int, str | None, int | None, int | None, int | None, str | None, datetime]


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """One configured queue (``tssctl queues set`` writes them; ``[[queues]]`` seeds them)."""

    name: str
    priority: int = 0
    #: At most this many drives for the queue's work at once; None: no limit.
    max_drives: int | None = None
    #: An operator paused it: none of its requests is a candidate or claimed.
    paused: bool = False
    #: Seconds within which the queue's requests should be done; None: no target.
    latency_target_s: float | None = None


class CandidateReads(Protocol):
    """The scheduler's reads of the queue (``store.scheduling``).

    :class:`tssd.db.scheduling.Scheduling` reads them in SQL,
    :class:`tssd.db.memory_scheduling.MemoryScheduling` in memory. A queued request of a
    *paused* queue, or a recall under a *held* path prefix, is never a candidate.
    """

    async def recall_volumes(
        self, paused: frozenset[str], held: Sequence[str], *, first: int | None = None
    ) -> list[tuple[str | None, int | None, int]]:
        """``(volume, priority, id)`` of queued, located recalls: with *first*, the first
        *first* of them in id order; without, one row per volume with its highest
        priority and its lowest id (in no order)."""
        ...

    async def unlocated(self, limit: int) -> list[Request]:
        """Up to *limit* queued recalls without a volume, oldest first."""
        ...

    async def volumes_with_recalls(self, candidates: Sequence[str]) -> set[str]:
        """Those of *candidates* that have recalls queued or active."""
        ...

    async def unwritten_migrations(self, paused: frozenset[str], limit: int) -> list[Request]:
        """Up to *limit* queued migrations with a checksum and no attempt yet, oldest
        first: the ones whose file may be on tape already."""
        ...

    async def migration_groups(
        self, paused: frozenset[str]
    ) -> list[tuple[str | None, int, int | None, datetime | None]]:
        """``(storage class, files, bytes, oldest created_at)`` of queued migrations, one
        row per storage class (in no order); bytes None when no size is known."""
        ...

    def pending_recalls(self) -> AsyncIterator[PendingRow]:
        """Every queued, located recall as ``(id, volume, position, size, priority, queue,
        created_at)``, in no order."""
        ...


class SchedulingClaims(Protocol):
    """The scheduler's claims (``store.scheduling``); the contract suite
    (``tests/integration/test_store_contract_scheduling.py``) runs them on every store.

    Every claim moves the requests it selects from queued to active in one step and
    returns them, active, in the order stated: ``drive`` set, ``attempts`` + 1,
    ``started_at`` now, ``instance`` the store's, an event ``queued -> active`` (reason:
    the drive). A request claimed concurrently (by another daemon on PostgreSQL) is
    skipped, never claimed twice. Requests of *paused* queues are never claimed.
    """

    async def claim_recalls(
        self,
        volume: str,
        drive: str,
        limit: int,
        *,
        queues: frozenset[str] | None = None,
        paused: frozenset[str] = frozenset(),
        held: Sequence[str] = (),
        min_priority: int | None = None,
        after: int | None = None,
        by_position: bool = True,
    ) -> list[Request]:
        """Up to *limit* queued recalls of *volume*: of *queues* (None: any), not under a
        *held* path prefix (a nearly full file system), of priority >= *min_priority*
        and position > *after* when given; in (position, id) order, else id order."""
        ...

    async def claim_migrations(
        self, storage_class: str, drive: str, limit: int, *, paused: frozenset[str] = frozenset()
    ) -> list[Request]:
        """Up to *limit* queued migrations of *storage_class*, highest priority first, then
        oldest."""
        ...

    async def claim_removals(self, limit: int) -> list[Request]:
        """Up to *limit* queued removals, oldest first; no drive (catalog work)."""
        ...

    async def claim_ids(self, ids: Iterable[int], drive: str | None = None) -> list[Request]:
        """Those of *ids* still queued (in no particular order)."""
        ...


class QueueSettings(Protocol):
    """The queue settings the scheduler reads (``store.queue_settings``;
    :class:`tssd.db.queues.QueueStore` in SQL)."""

    async def rows(self) -> list[QueueRecord]:
        """Every configured queue, in name order."""
        ...

    async def paused(self) -> frozenset[str]:
        """Names of the queues an operator paused."""
        ...


class SchedulingGateway(CandidateReads, SchedulingClaims, Protocol):
    """The scheduler's reads and claims together: what ``store.scheduling`` is."""


class SessionLedger(RequestLedger, Protocol):
    """What a tape session needs of the store: the ledger's transitions (finish, fail,
    requeue, relocate) and the claims of the recalls and migrations it takes."""

    @property
    def scheduling(self) -> SchedulingClaims:
        """The claims (a session claims its tape's recalls pass by pass)."""
        ...


class IntakeLedger(RequestLedger, Protocol):
    """What the scheduler's intake needs of the store: the ledger's transitions, the
    candidate reads and claims, and recording the recalls' copies it located."""

    @property
    def scheduling(self) -> SchedulingGateway:
        """The reads of the queue and the claims."""
        ...

    def set_locations(self, located: dict[int, tuple[str, int]]) -> Awaitable[None]:
        """Record ``request id -> (volume, position)``, whatever the state; no event."""
        ...


class SchedulerStore(Protocol):
    """What the scheduler's passes need of the store besides its parts' views."""

    @property
    def scheduling(self) -> SchedulingGateway:
        """The reads of the queue and the claims."""
        ...

    @property
    def queue_settings(self) -> QueueSettings:
        """The configured queues (paused ones are left out of every pass)."""
        ...

    def requeue_active(self, reason: str) -> Awaitable[int]:
        """At start-up: active requests go back to the queue (drive and start cleared);
        with the store's instance set only this instance's or unowned ones. How many moved."""
        ...

    async def counts(self) -> list[CountRow]:
        """``(kind, queue, state, count)`` for every combination present, in no order."""
        ...

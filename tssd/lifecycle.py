"""The request lifecycle, declared once: every named transition, its from-states and its
to-state (docs/architecture.md, "Request lifecycle").

The layers above ``tssd/db/`` change a request's state only through a named transition
of :class:`RequestLedger`; the stores (SQL and memory) take the from-states and the
to-state from :data:`LIFECYCLE`, never from their caller. A transition is conditional:
a request that is not in one of its from-states (finished, cancelled or claimed
elsewhere meanwhile) is left as it is, and the ids returned say which requests moved.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from tssd.domain import State


class Transition(enum.StrEnum):
    """The name of each way a request's state changes."""

    #: A drive (or the catalog, for a removal) takes a queued request.
    CLAIM = "claim"
    #: A session gives back what it did not get to (session ended, disk full, a
    #: transient error): back to the queue, on the same tape.
    REQUEUE = "requeue"
    #: The catalog moved the file's copy since it was located: queue it to locate again.
    RELOCATE = "relocate"
    #: The daemon that held it is gone (a crash before this start, a lost lease).
    RESTART = "restart"
    #: The work succeeded.
    FINISH = "finish"
    #: The work failed on a drive.
    FAIL = "fail"
    #: Failed before any drive took it (the file has no usable copy).
    REJECT = "reject"
    #: Its client withdrew it before any drive took it (an aborted ENDIT flush).
    WITHDRAW = "withdraw"
    #: An operator or its client cancelled it, wherever it is.
    CANCEL = "cancel"
    #: A done recall whose part file no pool call claimed in time.
    ABANDON = "abandon"
    #: An operator queues a failed or cancelled request again.
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class Move:
    """Where a transition applies (*sources*, in the order the SQL binds them) and where
    it leads (*target*)."""

    sources: tuple[State, ...]
    target: State


_OPEN = (State.QUEUED, State.ACTIVE)

#: The lifecycle: every transition's from-states and to-state.
LIFECYCLE: Mapping[Transition, Move] = MappingProxyType(
    {
        Transition.CLAIM: Move((State.QUEUED,), State.ACTIVE),
        Transition.REQUEUE: Move((State.ACTIVE,), State.QUEUED),
        Transition.RELOCATE: Move((State.ACTIVE,), State.QUEUED),
        Transition.RESTART: Move((State.ACTIVE,), State.QUEUED),
        Transition.FINISH: Move((State.ACTIVE,), State.DONE),
        Transition.FAIL: Move((State.ACTIVE,), State.FAILED),
        Transition.REJECT: Move((State.QUEUED,), State.FAILED),
        Transition.WITHDRAW: Move((State.QUEUED,), State.CANCELLED),
        Transition.CANCEL: Move(_OPEN, State.CANCELLED),
        Transition.ABANDON: Move((State.DONE,), State.ABANDONED),
        Transition.RETRY: Move((State.FAILED, State.CANCELLED), State.QUEUED),
    }
)


def sources(transition: Transition) -> tuple[str, ...]:
    """The states *transition* moves a request out of, as stored."""
    return tuple(state.value for state in LIFECYCLE[transition].sources)


def target(transition: Transition) -> State:
    """The state *transition* moves a request to."""
    return LIFECYCLE[transition].target


class RequestLedger(Protocol):
    """Every state change of a request that the layers above ``tssd/db/`` make.

    Each method is one named transition of :data:`LIFECYCLE`: it moves those of *ids*
    that are in the transition's from-states, in one step, and leaves the others (in
    any other state, or unknown) untouched; it returns the ids that moved. Every moved
    request gets an event with *reason* and ``updated_at`` now; a request that ends
    wakes its waiters and the notifier's listeners and is counted in the outcomes; a
    request queued again wakes the scheduler's work signal. Claims are the scheduler's
    (``SchedulingClaims``): they move queued to active as :data:`LIFECYCLE` says.

    Declared as returning awaitables, not as ``async def``: the SQL store wraps its
    transitions in ``db_retry``, which does.
    """

    def requeue(
        self, ids: Sequence[int], reason: str, *, error: str | None = None
    ) -> Awaitable[list[int]]:
        """Active -> queued, the drive cleared (and ``error`` set when given): a session
        gives back what it did not get to."""
        ...

    def relocate(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]:
        """Active -> queued with volume, position and drive cleared: the file's copy
        moved, the request is located again."""
        ...

    def restart(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]:
        """Active -> queued with drive and start time cleared: its daemon is gone."""
        ...

    def finish(self, request_id: int, reason: str | None = None, **values: Any) -> Awaitable[bool]:
        """Active -> done, setting *values* (columns; ``finished_at`` defaults to now).
        Whether it moved: False, and nothing changed, if it was not active (cancelled
        meanwhile, say)."""
        ...

    def fail(self, request_id: int, reason: str | None = None, **values: Any) -> Awaitable[bool]:
        """Active -> failed, setting *values* (``error``, ``error_code``; ``finished_at``
        defaults to now). Whether it moved."""
        ...

    def reject(
        self, ids: Sequence[int], reason: str, *, error: str, error_code: int | None
    ) -> Awaitable[list[int]]:
        """Queued -> failed (``error``, ``error_code``, ``finished_at`` now): the request
        cannot be served, found before any drive took it."""
        ...

    def withdraw(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]:
        """Queued -> cancelled (``error`` = *reason*, ``finished_at`` now); an active one
        is left to end by itself."""
        ...

    def cancel(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]:
        """Queued or active -> cancelled (``error`` = *reason*, ``finished_at`` now). A
        session holding an active one finds it cancelled when it finishes it."""
        ...

    def abandon(self, ids: Sequence[int], reason: str, *, error: str) -> Awaitable[list[int]]:
        """Done -> abandoned, setting ``error``: a part file nobody claimed in time.
        Awaits to the ids that moved."""
        ...

    def retry(self, ids: Sequence[int], reason: str) -> Awaitable[list[int]]:
        """Failed or cancelled -> queued (error, error code, finish time cleared, attempts
        0). Reopening a request whose key has another open request raises
        :class:`~tssd.errors.Conflict` and moves nothing."""
        ...

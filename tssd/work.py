"""The scheduler's work signal: what changed since its last pass, and the wake-up.

The scheduler owns it (``Scheduler.work``) and alone waits on it and takes what it noted;
the request store, the API and back-pressure are handed the same object and wake the
scheduler through its methods, each named for what happened. A pass then looks only at
the kinds of work that changed (:class:`Noted`), unless it is a full one.

It sits in the base layer because the request store, below the scheduler, wakes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tssd.domain import Kind


@dataclass(frozen=True)
class Noted:
    """What the signal noted since the scheduler last took it."""

    #: Kinds of requests submitted.
    submitted: frozenset[Kind] = frozenset()
    #: The queues table changed (``tssctl queues set``): reread it, look at migrations.
    queues: bool = False
    #: Work was requeued or others changed the queue: the next pass looks at everything.
    everything: bool = False

    @property
    def only_submissions(self) -> bool:
        """New requests and nothing else (a pass may wait a moment for more of them)."""
        return bool(self.submitted) and not self.queues and not self.everything


NOTHING = Noted()


class WorkSignal:
    """Wakes the scheduler's loop and notes why; only the scheduler reads it."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._noted = NOTHING
        #: The pools' calls in flight, which catching up on a backlog lets go first.
        self.foreground = Foreground()

    # -- the other layers: what happened ----------------------------------------------

    def submitted(self, kinds: Iterable[Kind]) -> None:
        """Requests of *kinds* were created."""
        fresh = frozenset(kinds) - self._noted.submitted
        if fresh:
            noted = self._noted
            self._noted = Noted(noted.submitted | fresh, noted.queues, noted.everything)
        self._event.set()

    def queues_changed(self) -> None:
        """An operator changed a queue: the scheduler rereads the queues table."""
        self._noted = Noted(self._noted.submitted, True, self._noted.everything)
        self._event.set()

    def requeued(self) -> None:
        """Work of any kind went back to queued (or others changed it): look at all."""
        self._noted = Noted(self._noted.submitted, self._noted.queues, True)
        self._event.set()

    def nudge(self) -> None:
        """Something may start now (a drive freed or enabled, space freed, a retry, a
        stop), with nothing new to note."""
        self._event.set()

    # -- the scheduler ----------------------------------------------------------------

    def peek(self) -> Noted:
        """What is noted so far, left in place."""
        return self._noted

    def take(self) -> Noted:
        """What is noted, cleared for the next pass."""
        noted, self._noted = self._noted, NOTHING
        return noted

    def clear(self) -> None:
        """The wake-up seen (a pass begins); what is noted stays until taken."""
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()


class Foreground:
    """The pools' single calls in flight (``tss-hsm``'s obtain, a submit of one request).

    Work that only catches up (locating a backlog of recalls after a bulk intake) waits
    for them before each of its batches, for at most a bound: a pool's call then shares
    the database and the two cores with one batch at most, not with a stream of them,
    and the backlog still moves while calls keep coming. A bulk submit is not a pool's
    call: gating on it would only grow the backlog.
    """

    def __init__(self) -> None:
        self._calls = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """One pool call in flight for the duration of the block."""
        self._calls += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._calls -= 1
            if not self._calls:
                self._quiet.set()

    @property
    def busy(self) -> bool:
        return self._calls > 0

    async def quiet(self, at_most_s: float) -> bool:
        """Wait until no pool call is in flight, for at most *at_most_s* seconds; whether
        it waited (no await at all when none is in flight)."""
        if not self._calls:
            return False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), at_most_s)
        return True

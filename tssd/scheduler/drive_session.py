"""One drive's session state, in one object: what it holds, its tier, its tour, its task.

A session on a drive is seen by several components: the scheduler starts and ends it,
the chooser plans with its estimated end, the tiers decide when it yields, the runner
reads and writes through it. Each once kept its own dict keyed by drive name; the state
of a session now lives in its :class:`DriveSession`, and :class:`DriveSessions` (the
scheduler's registry, one session object per drive) answers the questions that span the
drives: which sessions run, in what order they started, which volumes are reserved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from tssd.clock import Clock
from tssd.domain import Kind
from tssd.scheduler.drives import DriveState
from tssd.scheduler.reservations import Reservations


@dataclass
class Running:
    """A recall session's tour as the chooser plans with it."""

    volume: str
    queue: str
    priority: int
    until: float  # estimated end (clock seconds)


@dataclass(eq=False)
class DriveSession:
    """The session state of drive *name*; it outlives its sessions (one per drive).

    Reservations are written through to the registry's shared index (the scheduler
    checks and takes one without an ``await`` in between); a session releases only what
    it holds itself, so a volume it released early (the tape it unloaded) and another
    drive's session took meanwhile stays reserved for that one.
    """

    name: str
    reservations: Reservations
    #: The registry's sessions with a tour, in the order their tours began.
    tours: dict[str, DriveSession] = field(repr=False)
    #: The drive manager's table of drives (see :attr:`drive`).
    drives: Mapping[str, DriveState] = field(default_factory=dict, repr=False)
    #: Volumes and the storage class this drive's session (or its write) reserved.
    volumes: set[str] = field(default_factory=set)
    storage_class: str | None = None
    #: Priority floor of the current pass (None = every request): see ``tiers.py``.
    floor: int | None = None
    #: The session should end after the file it is reading (a preemption, a stagger).
    yield_requested: bool = False
    #: Clock moment the session ends at (staggered: ``stagger.py``); inf = none.
    stop_at: float = float("inf")
    #: Claimed, unread requests of a priority above 0: id -> (priority, arrival).
    held: dict[int, tuple[int, float]] = field(default_factory=dict)
    #: The recall tour the chooser planned (None: no recall session running).
    run: Running | None = None
    #: The tour was cut short to stagger the drives: (volume, stop).
    capped: tuple[str, float] | None = None
    #: The task running the session, if one runs.
    task: asyncio.Task[None] | None = None

    @property
    def drive(self) -> DriveState | None:
        """The drive (its mount: volume, counters), once the drive manager knows it."""
        return self.drives.get(self.name)

    # -- reservations -----------------------------------------------------------------

    def reserve(self, purpose: Kind, target: str, mounted: str | None) -> None:
        """Reserve a session's *target* (a volume to recall, a storage class to write)
        and the tape *mounted* in the drive now (until it is unloaded)."""
        if purpose is Kind.RECALL:
            self.reserve_volume(target)
        else:
            self.reserve_class(target)
        if mounted is not None:
            self.reserve_volume(mounted)

    def reserve_volume(self, volume: str) -> None:
        self.volumes.add(volume)
        self.reservations.hold_volume(volume)

    def release_volume(self, volume: str) -> None:
        """Release *volume* if this session holds it (released once: a later release
        would drop the reservation of a session that took the tape meanwhile)."""
        if volume in self.volumes:
            self.volumes.discard(volume)
            self.reservations.release_volume(volume)

    def reserve_class(self, storage_class: str) -> None:
        self.storage_class = storage_class
        self.reservations.hold_class(storage_class)

    def release(self) -> None:
        """The session ended: release everything it still holds."""
        if self.storage_class is not None:
            self.reservations.release_class(self.storage_class)
            self.storage_class = None
        for volume in sorted(self.volumes):
            self.release_volume(volume)

    # -- priority tier ----------------------------------------------------------------

    def begin_recall(self, priority: int, stop: float | None) -> None:
        """A recall session starts for work of *priority*: until its first pass sets
        its own floor, it runs at that tier (a session starting for urgent work must not
        look preemptible); *stop*: when it ends to stagger the drives, if it does."""
        self.floor = priority if priority > 0 else None
        if stop is not None:
            self.stop_at = stop

    def held_top(self) -> int:
        """The highest priority among claimed, unread requests (0: none)."""
        return max((p for p, _ in self.held.values()), default=0)

    # -- tour -------------------------------------------------------------------------

    def begin_tour(self, run: Running) -> None:
        self.run = run
        self.tours[self.name] = self

    def end_tour(self) -> tuple[str, float] | None:
        """The tour ended; returns its cap (volume, stop) if it was cut short."""
        self.tours.pop(self.name, None)
        self.run = None
        capped, self.capped = self.capped, None
        return capped

    def ended(self) -> None:
        """The session ended: no yield or stop is pending for the next one."""
        self.yield_requested = False
        self.stop_at = float("inf")
        self.task = None


class DriveSessions:
    """The scheduler's session object per drive, by drive name (made on first use).

    *drives* is the drive manager's live table (``DriveManager.drives``): a session
    finds its drive there. The reservations index spans the drives: a volume held by a
    dismount (``DriveManager.unload_expired``) is reserved there without a session.
    """

    def __init__(self, drives: Mapping[str, DriveState], clock: Clock) -> None:
        self.drives = drives
        self.clock = clock
        self.reservations = Reservations()
        self._sessions: dict[str, DriveSession] = {}
        self._tours: dict[str, DriveSession] = {}

    def of(self, name: str) -> DriveSession:
        """Drive *name*'s session object."""
        session = self._sessions.get(name)
        if session is None:
            session = DriveSession(name, self.reservations, self._tours, self.drives)
            self._sessions[name] = session
        return session

    def __iter__(self) -> Iterator[DriveSession]:
        return iter(self._sessions.values())

    def tours(self) -> dict[str, Running]:
        """The recall tours running, by drive, in the order they began."""
        return {name: s.run for name, s in self._tours.items() if s.run is not None}

    def yielding(self) -> frozenset[str]:
        """Drives whose sessions were asked to yield."""
        return frozenset(s.name for s in self._sessions.values() if s.yield_requested)

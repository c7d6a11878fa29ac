"""The cluster's book: the instances sharing a database, their drives, the volume claims.

:mod:`tssd.cluster` decides when to register, renew, reap and claim; a :class:`ClusterBook`
writes and reads what it decides, each call one transaction (or one read). Heartbeats are
written and compared in the book's own time (the database server's ``now()``), so the
clocks of the tape servers never matter for deciding that an instance is dead.

Implementations: :class:`tssd.db.cluster.SqlCluster` (for PostgreSQL: a daemon on SQLite
is alone, its node local, and leaves the book unused) and
:class:`tssd.db.memory_cluster.MemoryCluster`; one contract suite,
``tests/integration/test_cluster_contract.py``, runs on PostgreSQL, SQLite (all but the
leases) and memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

from tssd.domain import Drive, Instance

#: The states of an instance: renewing its lease, stopped cleanly, or declared dead.
LIVE, STOPPED, REAPED = "live", "stopped", "reaped"


@dataclass(frozen=True, slots=True)
class Member:
    """An instance with the age of its heartbeat, in the book's time."""

    instance: Instance
    heartbeat_age_s: float


@dataclass(frozen=True, slots=True)
class Roster:
    """Every instance (by id) and every drive (by name), as ``tssctl status`` shows them."""

    members: tuple[Member, ...]
    drives: tuple[Drive, ...]


@dataclass(frozen=True, slots=True)
class Released:
    """What one reaping released: the instances declared dead, and the ``(drive, volume)``
    of each of their mounts it closed."""

    instances: tuple[str, ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Orphan:
    """An active request held by an instance that is no longer live."""

    request_id: int
    instance: str | None


class ClusterSignals(Protocol):
    """What other instances did to the queue, as the book hears it (PostgreSQL
    ``LISTEN``); quiet where nobody else writes."""

    async def ensure(self) -> None:
        """Start listening unless already listening (again, after a lost connection).
        Where others write, each new start counts as one announcement: what they said
        meanwhile is unknown."""
        ...

    def take(self) -> bool:
        """Whether work was queued (or located) by anyone since the last call."""
        ...

    async def close(self) -> None:
        """Stop listening; :meth:`ensure` may start again."""
        ...


@runtime_checkable
class ClusterBook(Protocol):
    """The ``instances`` and the drive rows of every instance sharing one database."""

    async def register(
        self,
        instance: str,
        host: str,
        pid: int,
        lease: timedelta,
        drives: Sequence[str],
        *,
        alive: Callable[[int], bool],
    ) -> None:
        """Make *instance* live (started and renewed now) and the owner of *drives*
        (created enabled and empty when new).

        Raises :class:`~tssd.errors.ConfigError` if *instance* is live (renewed within
        *lease*) on another host or in another running process (*alive* says whether a
        pid of this host runs: a dead one is this instance restarting after a crash), or
        if one of *drives* belongs to another live instance. Nothing is written then.
        """
        ...

    async def renew(self, instance: str) -> bool:
        """Renew a live *instance*'s heartbeat; False if it is not live (reaped)."""
        ...

    async def others_live(self, instance: str, lease: timedelta) -> bool:
        """Whether an instance other than *instance* is live and renewed within *lease*."""
        ...

    async def mark_stopped(self, instance: str) -> None:
        """A clean stop of a live *instance*: nothing of it is left to reap."""
        ...

    async def roster(self) -> Roster:
        """Every instance with its heartbeat age, and every drive."""
        ...

    async def take_volume(self, drive: str, volume: str, instance: str) -> bool:
        """Write *volume* into *drive* (busy, *instance*'s); False, writing nothing, if
        another drive holds *volume* (a volume is in at most one drive, of any instance)."""
        ...

    async def foreign_volumes(self, own: Iterable[str], instance: str) -> set[str]:
        """The volumes held by drives that are neither among *own* nor *instance*'s."""
        ...

    async def release_expired(self, instance: str, lease: timedelta) -> Released:
        """Declare reaped every live instance but *instance* not renewed within *lease*,
        close its drives' open mounts and empty its drives, at once; two reapers never
        release one instance twice."""
        ...

    async def orphaned_active(self, instance: str) -> list[Orphan]:
        """The active requests held by instances (other than *instance*) no longer live."""
        ...

    def signals(self, on_done: Callable[[int], None]) -> ClusterSignals:
        """A listener of the queue's announcements; *on_done* is called with the id of
        each request finished (by any instance) while it listens."""
        ...

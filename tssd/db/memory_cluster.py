"""The cluster's book in memory: :class:`~tssd.ports.cluster.ClusterBook` without SQL.

For tests of :mod:`tssd.cluster` that need no database, and held to the same contract
(``tests/integration/test_cluster_contract.py``). Several instances may share one book as
they share one database; the drives are those of a
:class:`~tssd.db.memory_mounts.MemoryMounts` (its ``holding`` is the drives' volume
column, its ``enabled`` their service), the requests those of a
:class:`~tssd.db.memory.MemoryStore`. Heartbeats are in this process's time, the book's
own clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tssd.db.listen import QuietSignals, WorkListener
from tssd.db.memory import MemoryStore
from tssd.db.memory_mounts import MemoryMounts
from tssd.db.models import utcnow
from tssd.domain import Drive, Instance, State
from tssd.errors import ConfigError
from tssd.ports.cluster import (
    LIVE,
    REAPED,
    STOPPED,
    ClusterBook,
    ClusterSignals,
    Member,
    Orphan,
    Released,
    Roster,
)


@dataclass
class InstanceRow:
    id: str
    host: str
    pid: int
    state: str
    started_at: datetime
    heartbeat_at: datetime


@dataclass
class DriveRow:
    """The columns of a drive the mounts do not keep."""

    state: str
    instance: str | None
    updated_at: datetime


class MemoryCluster:
    """The instances and drives of one :class:`MemoryStore` and its mounts."""

    def __init__(
        self,
        store: MemoryStore | None = None,
        mounts: MemoryMounts | None = None,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store if store is not None else MemoryStore()
        self.mounts = mounts if mounts is not None else MemoryMounts()
        self.now = now
        self.instances: dict[str, InstanceRow] = {}
        self.drives: dict[str, DriveRow] = {}

    # -- instances ---------------------------------------------------------------------

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
        now = self.now()
        row = self._fresh(instance, lease, now)
        # The same host with a dead pid is this instance restarting after a crash.
        if row is not None and (row.host != host or (row.pid != pid and alive(row.pid))):
            raise ConfigError(
                f"cluster.instance {instance!r} is live on {row.host} (pid {row.pid}): "
                "give every instance its own id"
            )
        for name in drives:
            owner = self.drives[name].instance if name in self.drives else None
            if owner not in (None, instance) and self._fresh(owner, lease, now):
                raise ConfigError(
                    f"drive {name} belongs to live instance {owner}: give every instance "
                    "its own drive names (sim.drive_prefix, scsi.drives)"
                )
        self.instances[instance] = InstanceRow(instance, host, pid, LIVE, now, now)
        for name in drives:
            self.mounts.enabled.setdefault(name, True)
            self.mounts.holding.setdefault(name, None)
            self.drives.setdefault(name, DriveRow("empty", None, now)).instance = instance

    def _fresh(self, instance: str | None, lease: timedelta, now: datetime) -> InstanceRow | None:
        row = self.instances.get(instance) if instance is not None else None
        if row is None or row.state != LIVE or row.heartbeat_at < now - lease:
            return None
        return row

    async def renew(self, instance: str) -> bool:
        row = self.instances.get(instance)
        if row is None or row.state != LIVE:
            return False
        row.heartbeat_at = self.now()
        return True

    async def others_live(self, instance: str, lease: timedelta) -> bool:
        now = self.now()
        return any(self._fresh(other, lease, now) for other in self.instances if other != instance)

    async def mark_stopped(self, instance: str) -> None:
        row = self.instances.get(instance)
        if row is not None and row.state == LIVE:
            row.state, row.heartbeat_at = STOPPED, self.now()

    async def roster(self) -> Roster:
        now = self.now()
        members = tuple(
            Member(
                Instance(r.id, r.host, r.pid, r.state, r.started_at, r.heartbeat_at),
                (now - r.heartbeat_at).total_seconds(),
            )
            for _, r in sorted(self.instances.items())
        )
        return Roster(members, tuple(self._drive(name) for name in sorted(self._names())))

    def _names(self) -> set[str]:
        return set(self.drives) | set(self.mounts.holding) | set(self.mounts.enabled)

    def _drive(self, name: str) -> Drive:
        row = self.drives.get(name) or DriveRow("empty", None, self.now())
        enabled = self.mounts.enabled.get(name, True)
        return Drive(name, enabled, row.state, self.mounts.holding.get(name), row.updated_at,
                     row.instance)  # fmt: skip

    # -- volume claims -----------------------------------------------------------------

    async def take_volume(self, drive: str, volume: str, instance: str) -> bool:
        holders = {d for d, v in self.mounts.holding.items() if v == volume}
        if holders - {drive}:
            return False
        if drive in self._names():  # as an UPDATE: an unknown drive changes nothing
            self.mounts.holding[drive] = volume
            self.drives[drive] = DriveRow("busy", instance, self.now())
        return True

    async def foreign_volumes(self, own: Iterable[str], instance: str) -> set[str]:
        mine = set(own)
        return {
            volume
            for name, volume in self.mounts.holding.items()
            if volume is not None
            and name not in mine
            and (name not in self.drives or self.drives[name].instance != instance)
        }

    # -- reaping -----------------------------------------------------------------------

    async def release_expired(self, instance: str, lease: timedelta) -> Released:
        now = self.now()
        dead = sorted(
            r.id
            for r in self.instances.values()
            if r.state == LIVE and r.id != instance and r.heartbeat_at < now - lease
        )
        for name in dead:
            self.instances[name].state = REAPED
        drives = {name for name, row in self.drives.items() if row.instance in dead}
        closed = []
        for mount in self.mounts.mounts:
            if mount.drive in drives and mount.dismounted_at is None:
                mount.dismounted_at = now
                closed.append((mount.drive, mount.volume))
        for name in drives:
            self.mounts.holding[name] = None
            self.drives[name].state, self.drives[name].updated_at = "empty", now
        return Released(tuple(dead), tuple(closed))

    async def orphaned_active(self, instance: str) -> list[Orphan]:
        gone = {r.id for r in self.instances.values() if r.state != LIVE and r.id != instance}
        # The store's rows, read as the SQL book reads the requests table.
        rows = self.store._rows
        return [
            Orphan(request_id, row["instance"])
            for request_id, row in rows.items()
            if row["state"] == State.ACTIVE and row["instance"] in gone
        ]

    def signals(self, on_done: Callable[[int], None]) -> ClusterSignals:
        """Quiet: every instance of a memory book is in this process, whose finishes
        reach its waiters directly."""
        return QuietSignals()


if TYPE_CHECKING:
    from tssd.db.cluster import SqlCluster

    def _conforms(memory: MemoryCluster, sql: SqlCluster) -> None:
        """For mypy: both books have the port's signatures, and both signals theirs."""
        books: list[ClusterBook] = [memory, sql]
        signals: list[ClusterSignals] = [QuietSignals(), WorkListener(sql.engine)]
        del books, signals

"""This instance's place among those sharing the database: register, heartbeat, reap.

On SQLite (or with ``cluster.enabled = false``) the node is local: no table is written and
the status shows this instance alone. A shared node keeps its rows in a
:class:`~tssd.ports.cluster.ClusterBook` and hears the others through its
:class:`~tssd.ports.cluster.ClusterSignals`; ``tssd/app.py`` hands it the book.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import structlog

from tssd.backends.base import TapeBackend
from tssd.clock import utcnow
from tssd.cluster.claims import LocalClaims, SharedClaims, VolumeClaims
from tssd.cluster.reaper import Reaper
from tssd.cluster.registry import Registry
from tssd.config import ClusterSettings
from tssd.domain import State
from tssd.errors import ConfigError
from tssd.lifecycle import RequestLedger
from tssd.ports.cluster import ClusterBook

log = structlog.get_logger()

#: Exit status of an instance that lost its lease (EX_TEMPFAIL: the service manager
#: restarts it, and it comes back as a fresh live instance).
FENCED_EXIT = 75
#: Fraction of the lease without a renewal after which an instance stops by itself; the
#: others reap it only after the whole lease, and after a lease of their own renewals.
FENCE_AT = 2 / 3


class _Moves(Protocol):
    def moved(self, ids: Sequence[int], state: State) -> None: ...


class _Finishes(Protocol):
    def finished(self, ids: Sequence[int]) -> None: ...


class NodeStore(RequestLedger, Protocol):
    """The request store as a shared node uses it: the ledger requeues a dead instance's
    requests; the poll index and the notifier learn of requests finished elsewhere."""

    #: This daemon's id when several share the database (as the store claims with it).
    instance: str | None

    @property
    def polls(self) -> _Moves: ...

    @property
    def notifier(self) -> _Finishes: ...


def instance_id(settings: ClusterSettings) -> str:
    return settings.instance or socket.gethostname()


def fence(instance: str) -> None:
    """Stop at once, writing nothing more: others have taken this instance's work."""
    log.critical("cluster.fenced", instance=instance)
    os._exit(FENCED_EXIT)


class Node:
    """The cluster as one instance sees it."""

    def __init__(
        self,
        instance: str,
        claims: VolumeClaims,
        *,
        drive_names: list[str] | None = None,
        on_changes: Callable[[], None] | None = None,
    ) -> None:
        self.instance = instance
        self.claims = claims
        self.drive_names: list[str] = drive_names or []
        #: Called when others changed the queue (the scheduler reloads its index).
        self.on_changes = on_changes

    @property
    def shared(self) -> bool:
        return False

    async def status(self) -> list[dict[str, Any]]:
        now = utcnow().isoformat()
        return [
            {"id": self.instance, "host": socket.gethostname(), "pid": os.getpid(),
             "state": "live", "self": True, "started_at": None, "heartbeat_at": now,
             "heartbeat_age_s": 0.0, "drives": [{"name": n} for n in self.drive_names]}
        ]  # fmt: skip


class SharedNode(Node):
    """One of several instances on one PostgreSQL database."""

    def __init__(
        self,
        settings: ClusterSettings,
        book: ClusterBook,
        store: NodeStore,
        on_lost: Callable[[str], None] = fence,
        *,
        claims: SharedClaims | None = None,
        on_changes: Callable[[], None] | None = None,
    ) -> None:
        instance = instance_id(settings)
        self._claims = claims if claims is not None else SharedClaims(book, instance)
        super().__init__(instance, self._claims, on_changes=on_changes)
        self.settings = settings
        self.registry = Registry(book, instance, socket.gethostname(), settings.lease_s)
        self.reaper = Reaper(book, store, instance, settings.lease_s)
        self.listener = book.signals(self._finished_elsewhere)
        self._store = store
        self.on_lost = on_lost
        self._task: asyncio.Task[None] | None = None
        self._renewed = asyncio.get_running_loop().time()
        #: Since when this instance's renewals have come without a long gap.
        self._streak = self._renewed

    @property
    def shared(self) -> bool:
        return True

    async def start(self, drive_names: list[str]) -> None:
        self.drive_names = drive_names
        self._claims.own(drive_names)
        await self.registry.register(drive_names)
        await self._claims.refresh()
        await self.listener.ensure()
        self._task = asyncio.create_task(self._beat(), name="cluster-heartbeat")
        log.info("cluster.joined", instance=self.instance, drives=drive_names)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.listener.close()
        await self.registry.stopped()
        log.info("cluster.left", instance=self.instance)

    async def status(self) -> list[dict[str, Any]]:
        return await self.registry.view()

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.settings.heartbeat_s)
            try:
                await self.tick()
            except Exception as exc:  # the database may be failing over: keep trying
                log.warning("cluster.heartbeat_failed", instance=self.instance, error=str(exc))
            if loop.time() - self._renewed > self.settings.lease_s * FENCE_AT:
                # Cut off from the database while others may not be: stop before they can
                # reap us, so nothing of ours is written after our work is given away.
                self.on_lost(self.instance)
                return

    def _finished_elsewhere(self, request_id: int) -> None:
        # As if finished here: waiters wake, the scheduler's index and the poll cache drop
        # it (any final state does). Our own finishes come back too; all of this is
        # idempotent.
        self._store.polls.moved([request_id], State.DONE)
        self._store.notifier.finished([request_id])

    async def tick(self) -> None:
        """Renew the lease, reap the dead, refresh the foreign volumes."""
        if not await self.registry.renew():
            self.on_lost(self.instance)
            return
        now = asyncio.get_running_loop().time()
        if now - self._renewed > self.settings.lease_s / 3:
            # We were cut off (the database failing over?): so were the others, probably.
            self._streak = now
        self._renewed = now
        # Reap only with a lease's worth of renewals behind us: after an outage everyone's
        # heartbeat is old, and the others get a whole lease to renew theirs first.
        steady = now - self._streak >= self.settings.lease_s
        dead = await self.reaper.reap() if steady else []
        await self._claims.refresh()
        await self.listener.ensure()
        # Alone, this instance's own index is current: only others' changes need a reload.
        announced = self.listener.take() and await self.registry.others_live()
        if (dead or announced) and self.on_changes is not None:
            self.on_changes()


def is_shared(settings: ClusterSettings, *, postgres: bool) -> bool:
    """Whether this daemon shares its database with others: on PostgreSQL, unless disabled."""
    return settings.enabled and postgres


def store_instance(settings: ClusterSettings, *, postgres: bool) -> str | None:
    """The ``instance`` of this daemon's RequestStore: its id when shared, else None."""
    return instance_id(settings) if is_shared(settings, postgres=postgres) else None


def volume_claims(settings: ClusterSettings, book: ClusterBook, *, postgres: bool) -> VolumeClaims:
    """The claims :func:`cluster_node` keeps current (built first: the drives ask them)."""
    if is_shared(settings, postgres=postgres):
        return SharedClaims(book, instance_id(settings))
    return LocalClaims()


@asynccontextmanager
async def cluster_node(
    settings: ClusterSettings,
    book: ClusterBook,
    store: NodeStore,
    backend: TapeBackend,
    *,
    postgres: bool,
    claims: VolumeClaims | None = None,
    on_changes: Callable[[], None] | None = None,
) -> AsyncIterator[Node]:
    """The node of this daemon: shared on PostgreSQL (unless disabled), else local.

    *book* holds the cluster's rows (the database of *store*, on *postgres* or not);
    *claims* come from :func:`volume_claims`; *on_changes* is called when other instances
    changed the queue. The store's ``instance`` must be :func:`instance_id` when shared.
    """
    if not is_shared(settings, postgres=postgres):
        names = [d.name for d in await backend.drives()]
        local = claims if claims is not None else LocalClaims()
        yield Node(instance_id(settings), local, drive_names=names, on_changes=on_changes)
        return
    if settings.lease_s < 3 * settings.heartbeat_s:
        raise ConfigError(
            f"cluster.lease_s ({settings.lease_s}) must be at least 3 heartbeats "
            f"(cluster.heartbeat_s = {settings.heartbeat_s})"
        )
    if claims is not None and not isinstance(claims, SharedClaims):
        raise TypeError("a shared node needs SharedClaims (tssd.cluster.node.volume_claims)")
    if store.instance != instance_id(settings):
        # Its requeue at start would otherwise take back the other instances' work.
        raise ValueError("a shared node needs RequestStore(instance=instance_id(settings))")
    shared = SharedNode(settings, book, store, claims=claims, on_changes=on_changes)
    await shared.start([d.name for d in await backend.drives()])
    try:
        yield shared
    finally:
        with contextlib.suppress(Exception):
            await shared.close()

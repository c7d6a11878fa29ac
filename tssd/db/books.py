"""Every book the daemon keeps, opened in one place: in SQL (SQLite, PostgreSQL) or in memory.

The composition root (:mod:`tssd.app`) asks this module, and only this one, for the
implementations of the ports: :func:`open_books` picks :func:`open_sql_books` (an engine,
its schema checked, the SQL stores on one session factory) or, for ``memory://``,
:func:`memory_books` (the memory stores, sharing their rows as the SQL ones share the
database). Either way the result is a :class:`Books` typed on the ports alone, so nothing
above ``tssd/db/`` holds an engine, a session factory or an implementation class.
The retention loop over any :class:`~tssd.ports.history.Retention` is handed on from
:mod:`tssd.db.retention` (:func:`retention`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.backends.catalog import CatalogGateway
from tssd.config import Settings
from tssd.db.admin import AdminStore
from tssd.db.catalogs import SqlCatalogs
from tssd.db.cluster import SqlCluster
from tssd.db.counts import Counts
from tssd.db.engine import (
    MEMORY_URL,
    create_engine,
    database_name,
    is_memory,
    is_postgres,
    session_factory,
)
from tssd.db.gauges import GaugeStore
from tssd.db.glance import GlanceStore
from tssd.db.health import SqlHealth
from tssd.db.interface import MountBook, RequestStoreInterface
from tssd.db.lookups import SqlHistory
from tssd.db.memory import MemoryStore
from tssd.db.memory_catalogs import MemoryCatalogs
from tssd.db.memory_cluster import MemoryCluster
from tssd.db.memory_health import MemoryHealth
from tssd.db.memory_history import MemoryHistory, MemoryRetention
from tssd.db.memory_mounts import MemoryMounts
from tssd.db.memory_reports import (
    MemoryAdmin,
    MemoryEfficiency,
    MemoryGauges,
    MemoryGlance,
    MemoryReads,
)
from tssd.db.mounts import MountStore
from tssd.db.notifier import Notifier, Outcomes
from tssd.db.reports import ReportStore
from tssd.db.retention import SqlRetention, retention
from tssd.db.schema import ensure_schema
from tssd.db.statistics import Upkeep as Statistics
from tssd.db.store import RequestStore
from tssd.db.throwaway import memory_engine
from tssd.ports.cluster import ClusterBook
from tssd.ports.health import HealthBook
from tssd.ports.history import RequestHistory, Retention
from tssd.ports.reports import Admin, Efficiency, Gauges, Glance
from tssd.ports.upkeep import Upkeep
from tssd.work import WorkSignal

log = structlog.get_logger()
__all__ = [
    "Books",
    "BooksOpener",
    "Hooks",
    "memory_books",
    "open_books",
    "open_sql_books",
    "retention",
    "sql_books",
]

#: Called with the ids of requests that just finished.
FinishedListener = Callable[[Sequence[int]], object]
#: Makes the one connection of a throw-away in-memory SQLite database (``tssd simulate``).
Connector = Callable[[], Awaitable[Any]]


def _alone(shareable: bool) -> str | None:
    return None


@dataclass(frozen=True)
class Hooks:
    """What the layers above hand the books: who is told of what the store does."""

    #: Told, in order, the ids of requests that just finished (the planner, simulate).
    finished: tuple[FinishedListener, ...] = ()
    #: Told of every request the store ends (the requests-total counter).
    outcomes: Outcomes | None = None
    #: Told of every table analysed (the ANALYZE counter).
    analysed: Callable[[str], None] | None = None
    #: This daemon's id for the store's claims, given whether several daemons can share
    #: the database (PostgreSQL); None: it is alone (``tssd.cluster.node.store_instance``).
    instance: Callable[[bool], str | None] = _alone


@dataclass(frozen=True)
class Books:
    """The implementation of every port, over one database (or one process's memory)."""

    store: RequestStoreInterface
    #: The drive, mount and tape rows the drive manager writes.
    mounts: MountBook
    #: The backends' catalogs (the backend factory hands them on).
    catalogs: CatalogGateway
    admin: Admin
    glance: Glance
    reports: Efficiency
    gauges: Gauges
    history: RequestHistory
    retention: Retention
    cluster: ClusterBook
    health: HealthBook
    #: Table statistics and background counts; its owner closes it at shutdown.
    upkeep: Upkeep
    #: What ``tssctl status`` shows: ``sqlite``, ``postgresql`` or ``memory``.
    database: str
    #: Whether several daemons can share this database (tssd.cluster): PostgreSQL only.
    shareable: bool = field(default=False)


#: What :func:`tssd.app.build_services` opens its books with.
BooksOpener = Callable[[Hooks], AbstractAsyncContextManager[Books]]


def open_books(settings: Settings, hooks: Hooks) -> AbstractAsyncContextManager[Books]:
    """The books of ``database.url``: in memory for ``memory://``, else in SQL."""
    if is_memory(settings.database_url):
        return _opened(memory_books(settings, hooks))
    return open_sql_books(settings, hooks)


@asynccontextmanager
async def _opened(books: Books) -> AsyncIterator[Books]:
    log.info("db.ready", database=books.database, revision=None)
    try:
        yield books
    finally:
        await books.upkeep.close()


@asynccontextmanager
async def open_sql_books(
    settings: Settings, hooks: Hooks | None = None, *, throwaway: Connector | None = None
) -> AsyncIterator[Books]:
    """The books in the database of *settings*, its schema checked (and created on an
    empty one with ``database.auto_init``); the engine is disposed of on exit.

    With *throwaway* the database is instead a new in-memory SQLite on the one connection
    it makes, its schema made from the models (``tssd simulate``).
    """
    if throwaway is None:
        engine = create_engine(
            settings.database_url,
            pool_size=settings.database.pool_size,
            busy_timeout_s=settings.database.busy_timeout_s,
        )
    else:
        engine = await memory_engine(throwaway)
    try:
        if throwaway is None:
            revision = await ensure_schema(engine, auto_init=settings.database.auto_init)
            backend = database_name(settings.database_url)
            log.info("db.ready", database=backend, revision=revision)
        books = sql_books(engine, settings, hooks or Hooks())
        try:
            yield books
        finally:
            await books.upkeep.close()
    finally:
        await engine.dispose()


def sql_books(engine: AsyncEngine, settings: Settings, hooks: Hooks) -> Books:
    """The SQL stores on *engine*, which the caller owns."""
    sessions = session_factory(engine)
    postgres = is_postgres(engine)
    statistics = Statistics(engine, settings.database.analyze_rows, hooks.analysed)
    store = RequestStore(
        sessions, postgres=postgres, notifier=Notifier(hooks.finished), work=WorkSignal(),
        poll_ttl_s=settings.api.poll_cache_s, instance=hooks.instance(postgres),
        outcomes=hooks.outcomes, statistics=statistics,
    )  # fmt: skip
    return Books(
        store=store, mounts=MountStore(sessions), catalogs=SqlCatalogs(sessions),
        # The operator's reads share the store's counts (one recount for all).
        admin=AdminStore(sessions, store.tally), glance=GlanceStore(sessions),
        reports=ReportStore(sessions), gauges=GaugeStore(sessions, store.tally),
        history=SqlHistory(sessions), retention=SqlRetention(sessions),
        cluster=SqlCluster(sessions), health=SqlHealth(sessions),
        upkeep=SqlUpkeep(statistics, store.tally), database=engine.dialect.name,
        shareable=postgres,
    )  # fmt: skip


def memory_books(settings: Settings, hooks: Hooks | None = None) -> Books:
    """The books in this process's memory (``memory://``): the stores share their rows as
    the SQL ones share a database, and nothing outlives the process. One daemon only."""
    hooks = hooks or Hooks()
    store = MemoryStore(
        hooks.outcomes, notifier=Notifier(hooks.finished), poll_ttl_s=settings.api.poll_cache_s
    )
    mounts = MemoryMounts()
    reads = MemoryReads(store, mounts)
    return Books(
        store=store, mounts=mounts, catalogs=MemoryCatalogs(), admin=MemoryAdmin(reads),
        glance=MemoryGlance(reads), reports=MemoryEfficiency(reads), gauges=MemoryGauges(reads),
        history=MemoryHistory(store), retention=MemoryRetention(store),
        cluster=MemoryCluster(store, mounts), health=MemoryHealth(mounts), upkeep=NoUpkeep(),
        database=database_name(MEMORY_URL),
    )  # fmt: skip


class SqlUpkeep:
    """The statistics of :mod:`tssd.db.statistics` and the store's background recount."""

    def __init__(self, statistics: Statistics, tally: Counts) -> None:
        self._statistics = statistics
        self._tally = tally

    def changed(self, rows: int, *tables: str) -> None:
        self._statistics.changed(rows, *tables)

    async def close(self) -> None:
        # A running ANALYZE is waited for, then a background recount cancelled.
        await self._statistics.close()
        await self._tally.close()


class NoUpkeep:
    """The memory store's: no statistics to keep, nothing counted in the background."""

    def changed(self, rows: int, *tables: str) -> None:
        return None

    async def close(self) -> None:
        return None

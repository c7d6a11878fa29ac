"""Engine and session factory for SQLite (embedded) and PostgreSQL (production)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeAlias, TypeVar

import structlog
from sqlalchemy import event, exc
from sqlalchemy.engine import Engine as SyncEngine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.util import greenlet_spawn

from tssd.errors import ConfigError

# Short names for the database's objects: an engine and a factory of sessions (for db/
# alone: above it nothing holds either, tssd.db.books hands out the ports), and the
# database error, which the layers above catch without importing SQLAlchemy.
Engine: TypeAlias = AsyncEngine
Sessions: TypeAlias = async_sessionmaker[AsyncSession]
DatabaseError = SQLAlchemyError

P = ParamSpec("P")
T = TypeVar("T")
log = structlog.get_logger()

#: How long a store operation keeps retrying while the database is away (a PostgreSQL
#: restart or fail-over takes seconds; a SQLite writer lock is held for milliseconds).
RETRY_FOR_S = 120.0
_FIRST_DELAY_S = 0.05
_MAX_DELAY_S = 2.0


def create_engine(url: str, *, pool_size: int = 5, busy_timeout_s: float = 30.0) -> AsyncEngine:
    """An async engine for *url*; SQLite gets WAL, a busy timeout and foreign keys."""
    try:
        parsed = make_url(url)
    except Exception as exc:  # SQLAlchemy raises ArgumentError and ValueError
        raise ConfigError(f"database.url is not a SQLAlchemy URL: {url!r}") from exc
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": busy_timeout_s}
    elif backend == "postgresql":
        kwargs.update(pool_size=pool_size, max_overflow=pool_size)
        # Statements are prepared and cached per connection; after five runs PostgreSQL
        # may switch to a generic plan that ignores the values, and such a plan walked
        # every recall for a look-up by key (issue 22). Planning one of tssd's statements
        # costs far less than one walk of a million rows.
        kwargs["connect_args"] = {"server_settings": {"plan_cache_mode": "force_custom_plan"}}
    else:
        raise ConfigError(f"unsupported database {backend!r}: use sqlite+aiosqlite or postgresql")
    engine = create_async_engine(parsed, **kwargs)
    if backend == "sqlite":
        _sqlite_pragmas(engine, busy_timeout_s)
    return engine


def _sqlite_pragmas(engine: AsyncEngine, busy_timeout_s: float) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        # WAL lets readers (API) proceed while the scheduler writes; NORMAL is durable
        # against process crashes, which is what kill -9 tests and real life need.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.close()


#: The database URL of a daemon whose every row lives in its memory and ends with it
#: (:func:`tssd.db.books.memory_books`): for demonstrations and tests.
MEMORY_URL = "memory://"


def is_memory(url: str) -> bool:
    """Whether *url* names the in-memory database; ``memory://`` with anything after it is
    refused (a :class:`ConfigError`), so a mistyped path is not silently forgotten."""
    if not url.startswith("memory:"):
        return False
    if url != MEMORY_URL:
        raise ConfigError(f"database.url {url!r}: the in-memory database is {MEMORY_URL!r}")
    return True


def database_name(url: str) -> str:
    """The kind of database *url* names (sqlite, postgresql), as the logs show it."""
    return make_url(url).get_backend_name()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[Any]:
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


def is_transient(error: BaseException) -> bool:
    """Whether *error* means "the database is away or busy for a moment", not a bug.

    PostgreSQL: the connection broke or could not be made (restart, fail-over, network).
    SQLite: another writer held the lock beyond the busy timeout.
    """
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if not isinstance(error, exc.DBAPIError):
        return False
    if error.connection_invalidated or isinstance(error, exc.InterfaceError):
        return True
    text = str(error.orig if error.orig is not None else error).lower()
    if isinstance(error, exc.OperationalError) and ("locked" in text or "busy" in text):
        return True
    names = {type(e).__name__ for e in (error.orig, getattr(error.orig, "__cause__", None))}
    return bool(names & _PG_UNAVAILABLE) or ("connection" in text and "closed" in text)


# asyncpg's names for "the server is not there right now".
_PG_UNAVAILABLE = frozenset(
    {
        "ConnectionDoesNotExistError",
        "CannotConnectNowError",
        "ConnectionFailureError",
        "AdminShutdownError",
        "CrashShutdownError",
        "ConnectionRefusedError",
        "InterfaceError",
        "InternalClientError",
    }
)


def db_retry(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Retry a store operation (one whole transaction) while the database is away.

    The pool's pre-ping replaces connections a restart broke; this bridges the seconds
    the server is down. Only self-contained, conditional operations may be wrapped:
    a retried transaction must do no harm if the first attempt committed after all.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        deadline = time.monotonic() + RETRY_FOR_S
        delay = _FIRST_DELAY_S
        attempt = 1
        while True:
            try:
                return await fn(*args, **kwargs)
            except Exception as error:
                if not is_transient(error) or time.monotonic() + delay > deadline:
                    raise
                log.warning("db.retry", op=fn.__name__, attempt=attempt, delay_s=delay,
                            error=str(error).splitlines()[0][:200])  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY_S)
                attempt += 1

    return wrapper


def _in_greenlet(engine: SyncEngine, begin: bool, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    if begin:
        with engine.begin() as conn:
            return fn(conn, *args)
    with engine.connect() as conn:
        return fn(conn, *args)


async def in_transaction(engine: AsyncEngine, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)`` in one transaction on a synchronous ``Connection``.

    The whole transaction (check-out, statements, commit, check-in) runs in one greenlet,
    as ``AsyncConnection.run_sync`` runs its function: through ``AsyncEngine.begin()``
    every step is a greenlet switch of its own, and for a one-statement transaction on
    the hot path (a claim, a finish: once per file) they cost four times the statement.
    """
    return await greenlet_spawn(_in_greenlet, engine.sync_engine, True, fn, args)


async def reading(engine: AsyncEngine, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)`` on a connection without a transaction of its own, as
    :func:`in_transaction` (for reads: SQLite's autobegun read ends with the check-in)."""
    return await greenlet_spawn(_in_greenlet, engine.sync_engine, False, fn, args)

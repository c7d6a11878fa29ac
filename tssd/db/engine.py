"""Engine and session factory for SQLite (embedded) and PostgreSQL (production)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from tssd.errors import ConfigError


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


def session_factory(engine: AsyncEngine) -> async_sessionmaker[Any]:
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"

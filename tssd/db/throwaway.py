"""A database in memory for one run of ``tssd simulate``: SQLite, one connection, the
schema made from the models (no migrations to replay for a throw-away database)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool

from tssd.db.engine import Engine
from tssd.db.models import Base


async def memory_engine(async_creator: Callable[[], Awaitable[Any]]) -> Engine:
    """An engine on the one in-memory SQLite connection *async_creator* makes."""
    engine = create_async_engine(
        "sqlite+aiosqlite://",
        async_creator=async_creator,
        poolclass=StaticPool,
    )
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    return engine

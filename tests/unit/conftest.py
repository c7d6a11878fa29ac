"""Fixtures for unit tests that need a database: a fresh SQLite file with the ORM schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.db.engine import create_engine, session_factory
from tssd.db.memory import MemoryStore
from tssd.db.models import Base


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield session_factory(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def memory_store() -> MemoryStore:
    """The request store in dictionaries (tssd/db/memory.py), for tests that need the
    store's interface but no SQL: it passes the contract suite the real store passes
    (tests/integration/test_store_contract.py) in about a hundredth of the time."""
    return MemoryStore()

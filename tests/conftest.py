"""Fixtures shared by every test suite: fresh SQLite and PostgreSQL databases.

``db_url`` runs a test once per backend. The PostgreSQL half needs a server: by default
``postgresql://postgres@127.0.0.1:5432/postgres`` (override with ``TSSD_TEST_PG``, the
URL of a database to connect to for CREATE/DROP DATABASE). Without one the test is
skipped, except under ``CI=true``, where a missing server is a failure: CI must never go
green by skipping the PostgreSQL half.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

# The SP stand-in's fixtures, for every suite (tests/sp_fixtures.py).
from tests.sp_fixtures import sp_build, sp_client, sp_server

__all__ = ["sp_build", "sp_client", "sp_server"]

PG_ADMIN_URL = os.environ.get("TSSD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_CONNECT_TIMEOUT_S = 5.0

T = TypeVar("T")

# Whether the server answered, remembered so an absent server costs one timeout per run.
_pg_unreachable: dict[str, str] = {}


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run *coro* to completion on a private loop, even if the caller's loop is running."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, name="pg-admin")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


async def _pg_admin(*statements: tuple[str, tuple[Any, ...]]) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL, timeout=PG_CONNECT_TIMEOUT_S)
    try:
        for sql, args in statements:
            await conn.execute(sql, *args)
    finally:
        await conn.close()


def _pg_unavailable(reason: str) -> None:
    message = f"PostgreSQL at {PG_ADMIN_URL} unreachable: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: PostgreSQL tests must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh, empty SQLite database file."""
    return f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database, dropped after the test."""
    if "reason" in _pg_unreachable:
        _pg_unavailable(_pg_unreachable["reason"])
    name = f"tssd_t_{secrets.token_hex(6)}"
    try:
        _run(_pg_admin((f'CREATE DATABASE "{name}"', ())))
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        _pg_unreachable["reason"] = f"{type(exc).__name__}: {exc}"
        _pg_unavailable(_pg_unreachable["reason"])
    base = PG_ADMIN_URL.split("://", 1)[1].rsplit("/", 1)[0]
    yield f"postgresql+asyncpg://{base}/{name}"
    # A test that leaked a connection must not leave its database behind.
    _run(
        _pg_admin(
            (
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                (name,),
            ),
            (f'DROP DATABASE IF EXISTS "{name}"', ()),
        )
    )


#: The databases a ``db_url`` test runs on. ``TSSD_TEST_DATABASES=memory pytest
#: tests/acceptance`` runs every daemon of the acceptance suite on the in-memory store
#: (``memory://``); a test marked ``persistent`` (it restarts tssd and expects what it
#: recorded) is skipped there.
DATABASES = {
    "sqlite": pytest.param("sqlite", id="sqlite"),
    "postgres": pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    "memory": pytest.param("memory", id="memory"),
}
CHOSEN = os.environ.get("TSSD_TEST_DATABASES", "sqlite,postgres").split(",")


@pytest.fixture(params=[DATABASES[name.strip()] for name in CHOSEN])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh, empty database: the test runs once on SQLite and once on PostgreSQL."""
    if request.param == "memory":
        if request.node.get_closest_marker("persistent"):
            pytest.skip("memory:// keeps nothing across a restart")
        return "memory://"
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(fixture)
    return url

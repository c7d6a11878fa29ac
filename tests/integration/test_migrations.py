"""The Alembic migrations produce exactly the ORM schema, and tssd refuses any other."""

from __future__ import annotations

import shutil
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.db import schema
from tssd.db.engine import create_engine
from tssd.db.models import Base
from tssd.errors import SchemaError

TSSD_TABLES = set(Base.metadata.tables)
#: The newest revision in migrations/versions: bump it with each new migration.
HEAD = "0007v"

NEXT_REVISION = '''
"""a revision newer than the code under test"""

import sqlalchemy as sa
from alembic import op

revision = "9999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("test_extra", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade() -> None:
    op.drop_table("test_extra")
'''


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(db_url)
    yield eng
    await eng.dispose()


@pytest.fixture
def newer_code(tmp_path: Path) -> Path:
    """A copy of the migrations with one revision more: what a newer tssd ships."""
    target = tmp_path / "newer_migrations"
    shutil.copytree(schema.migrations_dir(), target, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "versions" / "9999_newer.py").write_text(
        NEXT_REVISION.replace("{head}", schema.head_revision())
    )
    return target


async def _sync(engine: AsyncEngine, fn: Any) -> Any:
    async with engine.connect() as conn:
        result = await conn.run_sync(fn)
        await conn.commit()
        return result


def _tables(conn: Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def _plain(value: Any) -> Any:
    """Reflection output made comparable: SQL fragments and types as text."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, sa.TextClause):
        return value.text
    if isinstance(value, sa.types.TypeEngine):
        return repr(value)
    return value


def _snapshot(conn: Connection) -> dict[str, Any]:
    """Everything reflection reports about the tssd tables."""
    insp = sa.inspect(conn)
    snap: dict[str, Any] = {}
    for table in sorted(_tables(conn) - {"alembic_version"}):
        snap[table] = _plain(
            {
                "columns": insp.get_columns(table),
                "pk": insp.get_pk_constraint(table),
                "fks": sorted(insp.get_foreign_keys(table), key=lambda f: f["name"] or ""),
                "uniques": sorted(insp.get_unique_constraints(table), key=lambda u: u["name"]),
                "indexes": sorted(insp.get_indexes(table), key=lambda i: i["name"]),
                "checks": sorted(insp.get_check_constraints(table), key=lambda c: c["name"]),
            }
        )
    return snap


def _expected_indexes() -> set[tuple[str, str, tuple[str, ...], bool]]:
    """(table, name, columns, unique) of every index and unique constraint in the ORM."""
    out: set[tuple[str, str, tuple[str, ...], bool]] = set()
    for table in Base.metadata.tables.values():
        for index in table.indexes:
            cols = tuple(c.name for c in index.columns)
            out.add((table.name, str(index.name), cols, bool(index.unique)))
        for cons in table.constraints:
            if isinstance(cons, sa.UniqueConstraint):
                cols = tuple(c.name for c in cons.columns)
                out.add((table.name, str(cons.name), cols, True))
    return out


def _reflected_indexes(conn: Connection) -> set[tuple[str, str, tuple[str, ...], bool]]:
    insp = sa.inspect(conn)
    out: set[tuple[str, str, tuple[str, ...], bool]] = set()
    for table in TSSD_TABLES:
        for index in insp.get_indexes(table):
            if "duplicates_constraint" in index:
                continue  # PostgreSQL reports a unique constraint's index too
            cols = tuple(str(c) for c in index["column_names"])
            out.add((table, str(index["name"]), cols, bool(index["unique"])))
        for cons in insp.get_unique_constraints(table):
            cols = tuple(cons["column_names"])
            out.add((table, str(cons["name"]), cols, True))
    return out


def _open_key_where(conn: Connection) -> str:
    [index] = [
        i for i in sa.inspect(conn).get_indexes("requests") if i["name"] == "uq_requests_open_key"
    ]
    where = index.get("dialect_options", {}).get(f"{conn.dialect.name}_where")
    return str(where.text if isinstance(where, sa.TextClause) else where)


def test_head_is_the_latest_revision() -> None:
    assert schema.head_revision() == HEAD
    assert (schema.migrations_dir() / "env.py").is_file()


async def test_upgrade_creates_exactly_the_orm_schema(engine: AsyncEngine) -> None:
    await schema.upgrade(engine)

    def check(conn: Connection) -> None:
        ctx = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        assert compare_metadata(ctx, Base.metadata) == []
        assert _tables(conn) == TSSD_TABLES | {"alembic_version"}
        assert _reflected_indexes(conn) == _expected_indexes()
        where = _open_key_where(conn)
        assert "state" in where and "'queued'" in where and "'active'" in where

    await _sync(engine, check)
    assert await schema.current_revision(engine) == schema.head_revision()


async def test_migrated_schema_equals_create_all(engine: AsyncEngine) -> None:
    """Stricter than autogenerate: names, FK actions, partial WHERE, types, defaults."""
    await schema.upgrade(engine)
    migrated = await _sync(engine, _snapshot)
    await schema.downgrade(engine, "base")

    def create_all(conn: Connection) -> None:
        conn.execute(sa.text("DROP TABLE alembic_version"))
        Base.metadata.create_all(conn)

    await _sync(engine, create_all)
    assert migrated == await _sync(engine, _snapshot)


async def test_open_key_index_allows_one_open_request(engine: AsyncEngine) -> None:
    await schema.upgrade(engine)
    insert = sa.text(
        "INSERT INTO requests (kind, state, key, hsm_type, hsm_instance, queue, priority, "
        "attempts, created_at, updated_at) VALUES ('recall', :state, 'p1', 'osm', 'osm', "
        "'default', 0, 0, :now, :now)"
    )
    now = datetime.now(UTC)
    async with engine.connect() as conn:
        # Finished requests do not count: a key may be recalled again and again.
        for state in ("done", "failed", "cancelled", "queued"):
            await conn.execute(insert, {"state": state, "now": now})
        await conn.commit()
        with pytest.raises(sa.exc.IntegrityError):
            await conn.execute(insert, {"state": "active", "now": now})
        await conn.rollback()


async def test_downgrade_to_base_leaves_no_tssd_tables(engine: AsyncEngine) -> None:
    await schema.upgrade(engine)
    await schema.downgrade(engine, "base")
    assert await _sync(engine, _tables) <= {"alembic_version"}
    assert await schema.current_revision(engine) is None


async def test_ensure_schema_initializes_an_empty_database(engine: AsyncEngine) -> None:
    head = schema.head_revision()
    assert await schema.ensure_schema(engine, auto_init=True) == head
    assert await schema.current_revision(engine) == head
    assert await _sync(engine, _tables) == TSSD_TABLES | {"alembic_version"}
    assert await schema.ensure_schema(engine, auto_init=True) == head


async def test_ensure_schema_reinitializes_after_downgrade_to_base(engine: AsyncEngine) -> None:
    await schema.upgrade(engine)
    await schema.downgrade(engine, "base")
    assert await schema.ensure_schema(engine, auto_init=True) == schema.head_revision()


async def test_ensure_schema_without_auto_init_refuses_empty(engine: AsyncEngine) -> None:
    with pytest.raises(SchemaError, match="tssd db upgrade"):
        await schema.ensure_schema(engine, auto_init=False)
    assert await _sync(engine, _tables) == set()


async def test_database_behind_the_code_is_refused(
    engine: AsyncEngine, newer_code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await schema.upgrade(engine)
    monkeypatch.setattr(schema, "migrations_dir", lambda: newer_code)
    with pytest.raises(SchemaError) as info:
        await schema.ensure_schema(engine, auto_init=True)
    message = str(info.value)
    assert "tssd db upgrade" in message
    assert HEAD in message and "9999" in message

    await schema.upgrade(engine)
    assert await schema.ensure_schema(engine, auto_init=False) == "9999"


async def test_database_ahead_of_the_code_is_refused(
    engine: AsyncEngine, newer_code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(schema, "migrations_dir", lambda: newer_code)
        await schema.upgrade(engine)
    with pytest.raises(SchemaError) as info:
        await schema.ensure_schema(engine, auto_init=True)
    message = str(info.value)
    assert "newer tssd" in message
    assert f"tssd db downgrade {HEAD}" in message

    # The fix the message names, run with the newer code, makes the database usable.
    with monkeypatch.context() as patch:
        patch.setattr(schema, "migrations_dir", lambda: newer_code)
        await schema.downgrade(engine, HEAD)
    assert await schema.ensure_schema(engine, auto_init=False) == HEAD
    assert "test_extra" not in await _sync(engine, _tables)


async def test_unknown_revision_is_refused(engine: AsyncEngine) -> None:
    await schema.upgrade(engine)

    def tamper(conn: Connection) -> None:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dcafe'"))

    await _sync(engine, tamper)
    with pytest.raises(SchemaError, match="f00dcafe"):
        await schema.ensure_schema(engine, auto_init=True)
    # The old code cannot downgrade from a revision it does not know either.
    with pytest.raises(SchemaError):
        await schema.downgrade(engine, "base")


async def test_tables_without_alembic_version_are_refused(engine: AsyncEngine) -> None:
    await _sync(engine, Base.metadata.create_all)
    with pytest.raises(SchemaError, match="alembic_version"):
        await schema.ensure_schema(engine, auto_init=True)
    with pytest.raises(SchemaError, match="alembic_version"):
        await schema.upgrade(engine)


async def test_unreachable_database_is_database_unavailable(tmp_path: Path) -> None:
    # A directory cannot be opened as a database file.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}")
    try:
        with pytest.raises(schema.DatabaseUnavailable):
            await schema.ensure_schema(engine, auto_init=True)
    finally:
        await engine.dispose()
    # aiosqlite's worker thread of the failed connect reports back to the loop later: let it
    # finish while the loop is still open.
    for thread in threading.enumerate():
        if thread.name.endswith("(_connection_worker_thread)"):
            thread.join(timeout=10)
    engine = create_engine("postgresql+asyncpg://postgres@127.0.0.1:1/none")
    try:
        with pytest.raises(schema.DatabaseUnavailable):
            await schema.current_revision(engine)
    finally:
        await engine.dispose()


async def test_sqlite_foreign_keys_are_back_on_after_migrating(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    try:
        await schema.upgrade(engine)
        async with engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
    finally:
        await engine.dispose()

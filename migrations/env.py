"""Alembic environment for tssd.

tssd runs the migrations itself (``tssd.db.schema``) and hands its connection over in
``config.attributes["connection"]``; developers running the ``alembic`` command get an
async engine built from ``TSSD_DATABASE_URL``, ``sqlalchemy.url`` in alembic.ini, or
else the database of tssd's own configuration.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig
from pathlib import Path

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tssd.db.models import Base

config = context.config
target_metadata = Base.metadata

# Only the CLI has an ini file; tssd keeps its own logging configuration.
if config.config_file_name is not None and config.attributes.get("connection") is None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = os.environ.get("TSSD_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from tssd.config import load_settings

    settings, _origin = load_settings()
    return settings.database_url


def _is_sqlite(dialect_name: str) -> bool:
    return dialect_name == "sqlite"


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        # SQLite cannot ALTER most things: batch mode recreates the table instead.
        render_as_batch=_is_sqlite(make_url(url).get_backend_name()),
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=_is_sqlite(connection.dialect.name),
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    # No tssd pragmas here: SQLite's foreign_keys stays off, as batch mode's table
    # copies need (DROP TABLE would otherwise cascade into the referencing rows).
    url = make_url(_url())
    if _is_sqlite(url.get_backend_name()) and url.database and url.database != ":memory:":
        # Like tssd serve: a fresh TSSD_HOME gets its directory created.
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
    else:
        asyncio.run(run_async_migrations())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

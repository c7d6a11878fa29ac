"""Schema versioning: run the Alembic migrations and check a database before serving.

The migrations live in the top-level ``migrations/`` directory of the source tree; a
built wheel carries them as ``tssd/_migrations``. ``tssd serve`` calls
:func:`ensure_schema`, ``tssd db upgrade``/``downgrade`` call :func:`upgrade` and
:func:`downgrade`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path

import structlog
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import inspect
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tssd.errors import DatabaseUnavailable, SchemaError, TssdError

log = structlog.get_logger()

VERSION_TABLE = "alembic_version"

# Arbitrary but fixed: serializes concurrent migrations (two daemons auto-initializing one
# PostgreSQL database) so the second one finds the schema done instead of colliding.
_PG_MIGRATION_LOCK = 0x7473_7364_0001


def migrations_dir() -> Path:
    """The Alembic script directory: packaged copy first, else the source tree's."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise SchemaError(
        f"tssd's database migrations are missing (looked in {package / '_migrations'} and "
        f"{package.parent / 'migrations'}): reinstall tssd"
    )


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    # ConfigParser interpolation would eat a '%' in the install path.
    cfg.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def _script_for(location: Path) -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(location).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    return ScriptDirectory.from_config(cfg)


def _script() -> ScriptDirectory:
    return _script_for(migrations_dir())


def head_revision() -> str:
    """The revision this code needs: the single head of the migration history."""
    head = _script().get_current_head()
    if head is None:
        raise SchemaError(f"no migrations found in {migrations_dir()}: reinstall tssd")
    return head


def _is_known(revision: str) -> bool:
    try:
        return _script().get_revision(revision) is not None
    except CommandError:
        return False


def _describe(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=True)


@contextlib.asynccontextmanager
async def _connect(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    try:
        conn = await engine.connect()
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        raise DatabaseUnavailable(
            f"cannot open database {_describe(engine)}: {_reason(exc)}"
        ) from exc
    try:
        yield conn
    finally:
        await conn.close()


def _state(conn: Connection) -> tuple[set[str], tuple[str, ...]]:
    """The table names and the Alembic revision(s) recorded in the database."""
    tables = set(inspect(conn).get_table_names())
    if VERSION_TABLE not in tables:
        return tables, ()
    return tables, tuple(MigrationContext.configure(conn).get_current_heads())


async def _read_state(engine: AsyncEngine) -> tuple[set[str], tuple[str, ...]]:
    async with _connect(engine) as conn:
        try:
            return await conn.run_sync(_state)
        except DBAPIError as exc:
            raise _translate(engine, "reading the schema revision", exc) from exc


def _reason(exc: BaseException) -> str:
    # The driver's own message, without SQLAlchemy's SQL echo and documentation link.
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).strip() or type(exc).__name__


def _translate(engine: AsyncEngine, doing: str, exc: DBAPIError) -> TssdError:
    if exc.connection_invalidated:
        return DatabaseUnavailable(
            f"lost database {_describe(engine)} while {doing}: {_reason(exc)}"
        )
    return SchemaError(f"{doing} failed on {_describe(engine)}: {_reason(exc)}")


def _single(engine: AsyncEngine, heads: tuple[str, ...]) -> str | None:
    if len(heads) > 1:
        raise SchemaError(
            f"database {_describe(engine)} records several schema revisions "
            f"({', '.join(sorted(heads))}); tssd never branches its migrations, so this "
            "database was changed by hand"
        )
    return heads[0] if heads else None


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision of the database, or None if it was never migrated."""
    _tables, heads = await _read_state(engine)
    return _single(engine, heads)


def _no_version_error(engine: AsyncEngine, tables: set[str]) -> SchemaError:
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    return SchemaError(
        f"database {_describe(engine)} has tables ({shown}) but no {VERSION_TABLE} table, "
        "so its schema revision is unknown: it was not created by 'tssd db upgrade'. "
        "Point database.url at an empty database (tssd creates the schema there) or empty "
        "this one"
    )


def _run_command(conn: Connection, engine: AsyncEngine, direction: str, revision: str) -> None:
    if direction == "upgrade":
        # Checked under the migration lock, so a concurrent initializer's tables count.
        tables, heads = _state(conn)
        if not heads and tables - {VERSION_TABLE}:
            raise _no_version_error(engine, tables - {VERSION_TABLE})
        command.upgrade(_config(conn), revision)
    else:
        command.downgrade(_config(conn), revision)


async def _migrate(engine: AsyncEngine, direction: str, revision: str) -> None:
    doing = f"{direction} to {revision}"
    async with _connect(engine) as conn:
        sqlite = conn.dialect.name == "sqlite"
        try:
            if sqlite:
                # tssd's connections enforce foreign keys; batch migrations recreate
                # tables, and DROP TABLE would cascade into the referencing rows. The
                # pragma is ignored inside a transaction, hence before anything else.
                await conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            elif conn.dialect.name == "postgresql":
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            # Alembic sees the transaction already begun and leaves the commit to us:
            # on PostgreSQL the whole migration is then atomic.
            await conn.run_sync(_run_command, engine, direction, revision)
            await conn.commit()
        except CommandError as exc:
            await conn.rollback()
            raise SchemaError(f"cannot {doing} on {_describe(engine)}: {exc}") from exc
        except DBAPIError as exc:
            await conn.rollback()
            raise _translate(engine, doing, exc) from exc
        finally:
            if sqlite:
                await _restore_foreign_keys(conn)


async def _restore_foreign_keys(conn: AsyncConnection) -> None:
    try:
        await conn.rollback()
        await conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        await conn.commit()
    except SQLAlchemyError:
        # Never hand a connection without foreign keys back to the pool.
        await conn.invalidate()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Apply the migrations up to *revision* (``tssd db upgrade``)."""
    await _migrate(engine, "upgrade", revision)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    """Revert the migrations down to *revision* (``base`` = no tssd tables left)."""
    await _migrate(engine, "downgrade", revision)


async def ensure_schema(engine: AsyncEngine, *, auto_init: bool) -> str:
    """Check that the database is at this code's revision before serving; return it.

    An empty database is initialized when *auto_init* is set. Anything else that is not
    at the head revision raises :class:`SchemaError` with the command that fixes it.
    """
    head = head_revision()
    tables, heads = await _read_state(engine)
    current = _single(engine, heads)
    tssd_tables = tables - {VERSION_TABLE}
    if current is None:
        if tssd_tables:
            raise _no_version_error(engine, tssd_tables)
        if not auto_init:
            raise SchemaError(
                f"database {_describe(engine)} is empty and database.auto_init is off: "
                "run 'tssd db upgrade' to create the schema"
            )
        await upgrade(engine, "head")
        log.info("db.initialized", revision=head, database=_describe(engine))
        return head
    if current == head:
        return head
    if _is_known(current):
        raise SchemaError(
            f"database schema is at revision {current}, this tssd needs {head}: "
            "run 'tssd db upgrade'"
        )
    raise SchemaError(
        f"database schema is at revision {current}, which this tssd (revision {head}) does "
        "not know: the database was upgraded by a newer tssd. Run that newer version, or "
        f"with the newer tssd run 'tssd db downgrade {head}' to use this one"
    )


async def administer(url: str, action: str, revision: str | None = None) -> str:
    """``tssd db ACTION`` on the database at *url*: ``upgrade`` (to the head),
    ``downgrade`` (to *revision*) or ``current``; return the line to show.

    ``memory://`` has no schema to change: the daemon makes its books at start, and
    nothing of them persists.
    """
    from tssd.db.engine import create_engine, is_memory

    if is_memory(url):
        what = {"upgrade": "nothing to upgrade", "downgrade": "nothing to downgrade"}
        return (
            f"database.url is {url}: {what.get(action, 'no schema revision')} "
            "(the daemon keeps every row in its memory, and nothing persists)"
        )
    engine = create_engine(url)
    try:
        if action == "upgrade":
            await upgrade(engine)
        elif action == "downgrade":
            await downgrade(engine, revision or "")
        else:
            current = await current_revision(engine)
            return f"database: {current or 'none'}  code: {head_revision()}"
        return f"database at revision {await current_revision(engine)}"
    finally:
        await engine.dispose()

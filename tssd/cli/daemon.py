"""``tssd``: run the daemon and administer its database.

Exit codes: 0 success; 1 runtime failure; 2 usage error; 3 configuration or schema error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

import structlog

from tssd.config import Settings, describe, load_settings, to_toml
from tssd.errors import ConfigError, SchemaError, TssdError
from tssd.logs import configure_logging

log = structlog.get_logger()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tssd",
        description="tssd: tape recall queue manager for dCache.",
        epilog="Settings: TOML file (--config or TSSD_CONFIG) and TSSD_<SECTION>_<KEY> "
        "environment variables; 'tssd config' lists them all. Exit codes: 0 ok, "
        "1 runtime failure, 2 usage, 3 configuration or schema error.",
    )
    parser.add_argument("--config", metavar="PATH", help="TOML configuration file")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("serve", help="run the daemon (API, scheduler, backend)")
    sub.add_parser("config", help="print every setting with its value, origin and meaning")
    db = sub.add_parser("db", help="database schema administration")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_sub.add_parser("upgrade", help="apply the Alembic migrations up to this version")
    down = db_sub.add_parser("downgrade", help="revert the schema to REVISION")
    down.add_argument("revision")
    db_sub.add_parser("current", help="print the database's schema revision and the code's")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings, origin = load_settings(args.config)
    except ConfigError as exc:
        print(f"tssd: {exc}", file=sys.stderr)
        return 3
    configure_logging(settings.log.level, settings.log.format)
    if args.command == "config":
        print(to_toml(settings, origin), end="")
        return 0
    try:
        if args.command == "serve":
            log.info(
                "config.effective",
                **{k: v for k, v, _, _ in describe(settings, origin)},
                overridden=sorted(k for k, src in origin.items() if src != "default"),
            )
            return _run(_serve(settings))
        return _run(_db(settings, args))
    except (ConfigError, SchemaError) as exc:
        log.error("daemon.refused", error=str(exc))
        print(f"tssd: {exc}", file=sys.stderr)
        return 3
    except TssdError as exc:
        log.error("daemon.failed", error=str(exc))
        print(f"tssd: {exc}", file=sys.stderr)
        return 1


def _run(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(coro)


async def _serve(settings: Settings) -> int:
    from tssd.app import serve

    await serve(settings)
    return 0


async def _db(settings: Settings, args: argparse.Namespace) -> int:
    from tssd.db import schema
    from tssd.db.engine import create_engine

    engine = create_engine(settings.database_url)
    try:
        if args.db_command == "upgrade":
            await schema.upgrade(engine)
            print(f"database at revision {await schema.current_revision(engine)}")
        elif args.db_command == "downgrade":
            await schema.downgrade(engine, args.revision)
            print(f"database at revision {await schema.current_revision(engine)}")
        else:
            current = await schema.current_revision(engine)
            print(f"database: {current or 'none'}  code: {schema.head_revision()}")
    finally:
        await engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``tssd``: run the daemon and administer its database.

Exit codes: 0 success; 1 runtime failure; 2 usage error; 3 configuration or schema error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import prometheus_client
import structlog

from tssd.config import Settings, describe, load_settings, sample_toml, to_toml
from tssd.errors import ConfigError, SchemaError, TssdError
from tssd.files import effective_roots
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
    serve = sub.add_parser("serve", help="run the daemon (API, scheduler, backend)")
    serve.add_argument(
        "--pool-root", action="append", default=[], metavar="DIR",
        help="also accept recall destinations and migrate sources below DIR (repeatable); "
        "without any and without api.pool_roots only $TSSD_HOME/pools",
    )  # fmt: skip
    serve.add_argument(
        "--database", metavar="URL",
        help="the database instead of database.url; memory:// keeps every row in the "
        "daemon's memory (demonstrations and tests: nothing persists)",
    )  # fmt: skip
    config = sub.add_parser("config", help="print every setting with its value, origin and meaning")
    config.add_argument(
        "--sample", action="store_true", help="every setting commented out at its default"
    )
    _add_simulate(sub)
    db = sub.add_parser("db", help="database schema administration")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_sub.add_parser("upgrade", help="apply the Alembic migrations up to this version")
    down = db_sub.add_parser("downgrade", help="revert the schema to REVISION")
    down.add_argument("revision")
    db_sub.add_parser("current", help="print the database's schema revision and the code's")
    return parser


def _add_simulate(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate",
        help="run a recall campaign against the simulated library in virtual time",
        description="Replay REQUESTS.csv against CATALOG.csv with the real scheduler, "
        "database layer and simulated library, on a virtual clock; print the JSON report.",
    )
    sim.add_argument("--catalog", type=Path, help="CATALOG.csv: pnfsid,volume,seq,size,...")
    sim.add_argument("--requests", type=Path, help="REQUESTS.csv: pnfsid,at[,priority,queue]")
    sim.add_argument("--profile", help="drive profile (default lto9, or sim.profile)")
    sim.add_argument("--drives", type=_positive, help="drives (default 10, or sim.drives)")
    sim.add_argument("--window", type=_positive, help="most requests outstanding at once")
    sim.add_argument("--policy", default="tssd", help="tssd (default), fifo or tss")
    sim.add_argument("--seed", type=int, help="seed of the simulated faults and layout")
    sim.add_argument("--robot-arms", type=_positive, help="robot arms (default 2)")
    sim.add_argument(
        "--config", dest="sim_config", metavar="PATH",
        help="the TOML file of 'tssd serve': its [scheduler] and [sim] settings apply",
    )  # fmt: skip
    sim.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override one [scheduler] or [sim] setting (repeatable)",
    )  # fmt: skip
    sim.add_argument("--report", type=Path, help="also write the JSON report here")
    sim.add_argument("--plot", type=Path, help="write a throughput-over-time PNG here")
    sim.add_argument("--list-profiles", action="store_true", help="print the drive profiles")
    sim.add_argument("--json", action="store_true", help="with --list-profiles: as JSON")


def _overridden(origin: dict[str, str]) -> set[str]:
    return {key for key, src in origin.items() if src != "default"}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # `*_created` series (a timestamp per counter and histogram child) double the series
    # count and no dashboard or alert here reads them. Process-wide, so set once here.
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        settings, origin = load_settings(args.config)
    except ConfigError as exc:
        print(f"tssd: {exc}", file=sys.stderr)
        return 3
    # A simulation logs every request of a campaign: only problems, unless asked for more.
    simulating = args.command == "simulate" and "log.level" not in _overridden(origin)
    configure_logging("warning" if simulating else settings.log.level, settings.log.format)
    if args.command == "config":
        print(sample_toml() if args.sample else to_toml(settings, origin), end="")
        return 0
    if args.command == "simulate":
        return _simulate(args)
    try:
        if args.command == "serve":
            settings = with_pool_roots(settings, args.pool_root)
            if args.database:
                database = dataclasses.replace(settings.database, url=args.database)
                settings = dataclasses.replace(settings, database=database)
                origin = {**origin, "database.url": "--database"}
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


def _simulate(args: argparse.Namespace) -> int:
    from tssd.simulate.command import list_profiles, simulate

    if args.list_profiles:
        profiles = list_profiles()
        if args.json:
            print(json.dumps(profiles, indent=2))
        else:
            for name, params in profiles.items():
                print(name, " ".join(f"{k}={v}" for k, v in params.items() if k != "name"))
        return 0
    if args.catalog is None or args.requests is None:
        print("tssd: simulate needs --catalog and --requests", file=sys.stderr)
        return 2
    try:
        options = _simulate_options(args)
        report = simulate(options, args.report, args.plot)
    except (OSError, TssdError) as exc:
        print(f"tssd: simulate: {exc}", file=sys.stderr)
        return 3 if isinstance(exc, ConfigError) else 1
    print(json.dumps(report, indent=2))
    return 0


def _simulate_options(args: argparse.Namespace) -> Any:
    """Options from the configuration file, ``--set`` and the flags (which win)."""
    from tssd.simulate.runner import Options
    from tssd.simulate.settings import apply_sets, overrides

    settings, origin = load_settings(args.sim_config or args.config)
    settings = apply_sets(settings, origin, args.set)
    fields: dict[str, Any] = {"profile": "lto9", "drives": 10, "robot_arms": 2, "seed": 0}
    fields.update(overrides(settings, origin))
    for name in ("profile", "drives", "robot_arms", "seed"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    return Options(
        catalog=args.catalog, requests=args.requests, window=args.window, policy=args.policy,
        **fields,
    )  # fmt: skip


async def _serve(settings: Settings) -> int:
    from tssd.app import serve

    await serve(settings)
    return 0


async def _db(settings: Settings, args: argparse.Namespace) -> int:
    from tssd.db.schema import administer

    revision = getattr(args, "revision", None)
    print(await administer(settings.database_url, args.db_command, revision))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def with_pool_roots(settings: Settings, extra: Sequence[str]) -> Settings:
    """The settings with ``api.pool_roots`` as enforced: configured (or ``$TSSD_HOME/pools``)
    plus the ``--pool-root`` directories; the default root is created if missing."""
    roots = effective_roots(settings.api.pool_roots, settings.home_path)
    if not settings.api.pool_roots.strip():
        Path(roots).mkdir(mode=0o750, parents=True, exist_ok=True)
    joined = ",".join([roots, *(os.path.abspath(r) for r in extra)])
    return dataclasses.replace(settings, api=dataclasses.replace(settings.api, pool_roots=joined))

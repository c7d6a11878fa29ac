"""``tssctl backend selftest``: commission a SCSI library (mhVTL or hardware) or an IBM
Spectrum Protect node.

It runs the backend's own code from the configuration (``--config`` or ``$TSSD_CONFIG``,
the file ``tssd serve`` uses), not through the daemon: the test needs a drive and a
cartridge (SCSI) or a mount point of the node (SP) for itself, so it refuses to run while
the daemon answers, unless ``--daemon-running-ok``.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol

from tssd.cli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    command,
    emit_json,
    fail,
    group,
    positive_int,
    wants_json,
)
from tssd.cli.render import cell
from tssd.errors import ConfigError, TssdError
from tssd.wire import ApiError, Client, WireError

if TYPE_CHECKING:  # the settings load only in the self-test, not in every tssctl command
    from tssd.config import Settings


class Step(Protocol):
    """A self-test step as both backends report it."""

    @property
    def name(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def detail(self) -> str: ...

    @property
    def seconds(self) -> float: ...


Steps = Callable[[], AsyncIterator[Step]]

group("backend", "test the tape backend (SCSI library or SP node self-test)")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="PATH", help="tssd's TOML file (default $TSSD_CONFIG)")
    parser.add_argument(
        "--volume", help="SCSI: barcode of a scratch cartridge the test may overwrite"
    )
    parser.add_argument("--drive", metavar="SERIAL", help="drive to use (default: first empty)")
    parser.add_argument(
        "--objects", type=positive_int, default=3, help="test objects to write (default 3)"
    )
    parser.add_argument(
        "--daemon-running-ok",
        action="store_true",
        help="run even though tssd answers (it must not be using this library)",
    )


def _daemon_answers(client: Client) -> bool:
    try:
        client.call("GET", "/v1/status")
    except (WireError, ApiError):
        return False
    return True


@command(
    "backend selftest",
    "SCSI: inventory, load, write, locate, read back and unload a tape; SP: sign on, "
    "archive, query, retrieve and delete test objects",
    _arguments,
)
def selftest(args: argparse.Namespace, client: Client) -> int:
    # Imported here: every other tssctl command starts faster without them.
    import asyncio

    from tssd.config import load_settings
    from tssd.logs import configure_logging

    try:
        settings, _ = load_settings(args.config)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    if settings.backend.type not in ("scsi", "sp"):
        return fail(
            f"backend.type is {settings.backend.type!r}: the self-test is for 'scsi' and 'sp'",
            EXIT_USAGE,
        )
    if settings.backend.type == "scsi" and not args.volume:
        return fail("the SCSI self-test needs --volume (a scratch cartridge)", EXIT_USAGE)
    if not args.daemon_running_ok and _daemon_answers(client):
        return fail(
            "tssd is running and may be using the library: stop it, or pass --daemon-running-ok",
            EXIT_FAILED,
        )
    # Library log lines go to stderr, and only warnings: stdout carries the steps.
    configure_logging("warning", settings.log.format)
    steps_of, expected = (
        _sp_steps(settings, args)
        if settings.backend.type == "sp"
        else (_scsi_steps(settings, args))
    )

    async def run() -> list[dict[str, object]]:
        steps = []
        async for step in steps_of():
            steps.append({"step": step.name, "ok": step.ok, "detail": step.detail,
                          "seconds": step.seconds})  # fmt: skip
            if not wants_json(args):
                mark = "ok  " if step.ok else "FAIL"
                line = f"{mark} {step.name:<12} {step.seconds:8.2f}s  {cell(step.detail)}"
                print(line, flush=True)
        return steps

    try:
        steps = asyncio.run(run())
    except TssdError as exc:
        return fail(str(exc), EXIT_FAILED)
    if wants_json(args):
        emit_json(steps)
    return (
        EXIT_OK
        if steps and all(s["ok"] for s in steps) and len(steps) == expected
        else (EXIT_FAILED)
    )


def _scsi_steps(settings: Settings, args: argparse.Namespace) -> tuple[Steps, int]:
    from tssd.backends.scsi.library import emulated_settings
    from tssd.backends.scsi.selftest import selftest as run_selftest

    scsi = settings.scsi
    if scsi.emulation_dir:
        scsi = emulated_settings(scsi, settings.path(scsi.emulation_dir))
    return lambda: run_selftest(scsi, args.volume, drive=args.drive, objects=args.objects), 7


def _sp_steps(settings: Settings, args: argparse.Namespace) -> tuple[Steps, int]:
    from tssd.backends.sp.backend import sp_settings
    from tssd.backends.sp.selftest import STEPS
    from tssd.backends.sp.selftest import selftest as run_selftest

    sp = sp_settings(settings)
    return lambda: run_selftest(sp, objects=args.objects), len(STEPS)

"""The tssctl subcommand registry, parser, exit codes and error mapping.

Each module of this package registers its subcommands with :func:`command`; tssctl's
``main`` imports them, builds the parser from :data:`COMMANDS` and hands the parsed
arguments to :func:`dispatch`. A new subcommand group (queues, drives, tapes, ...) is one
new module here plus its import in :mod:`tssd.cli.tssctl`.

Exit codes:
  0    ok
  1    some requests failed or were cancelled, or another error
  2    usage error
  3    tssd unreachable (not running, wrong --tssd / TSSD_URL, or shutting down)
  4    not found (HTTP 404)
  5    conflict with the current state (HTTP 409)
  6    rejected as invalid (HTTP 400, or bad lines in a --file-list)
  130  interrupted (the requests already submitted stay in tssd)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tssd.printable import printable_line
from tssd.shim.endpoint import SYSTEM_SOCKET
from tssd.shim.names import QUEUE
from tssd.wire import ApiError, Client, WireError, resolve_target

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_INVALID = 6
EXIT_INTERRUPTED = 130


def _epilog(doc: str | None) -> str:
    """--help shows the exit codes of the module docstring, kept in one place."""
    codes = (doc or "").partition("Exit codes:\n")[2].partition("\n\n")[0]
    return f"exit codes:\n{codes.rstrip()}\n\n{FINDING}"


FINDING = """\
tssd is found at --tssd, else $TSSD_URL, else $TSSD_HOME/tssd.sock (default
~/.local/state/tssd/tssd.sock) if it exists, else /run/tssd/tssd.sock (the shipped
systemd unit's) if it exists. Set TSSCTL_DEBUG=1 to see tracebacks."""
EPILOG = _epilog(__doc__)
HELP_LAYOUT: dict[str, Any] = {
    "epilog": EPILOG,
    "formatter_class": argparse.RawDescriptionHelpFormatter,
}

Runner = Callable[[argparse.Namespace, Client], int]
Arguments = Callable[[argparse.ArgumentParser], None]


# --- registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # ("requests", "list") for `tssctl requests list`
    help: str
    run: Runner
    add_arguments: Arguments | None = None


COMMANDS: list[Command] = []
GROUPS: dict[str, str] = {}  # help line of `tssctl NAME` for multi-word commands
DEFAULT_ACTIONS: dict[str, str] = {}  # `tssctl NAME` alone runs `tssctl NAME ACTION`


def command(name: str, help: str, arguments: Arguments | None = None) -> Callable[[Runner], Runner]:
    """Register ``run(args, client) -> exit code`` as ``tssctl <name>``."""

    def register(run: Runner) -> Runner:
        COMMANDS.append(Command(tuple(name.split()), help, run, arguments))
        return run

    return register


def group(name: str, help: str, default: str | None = None) -> None:
    """Describe ``tssctl NAME`` in --help, for a module whose commands are ``NAME ACTION``;
    with *default*, ``tssctl NAME [options]`` alone is ``tssctl NAME DEFAULT [options]``."""
    GROUPS[name] = help
    if default is not None:
        DEFAULT_ACTIONS[name] = default


# --- parser --------------------------------------------------------------------------


def _common_options() -> argparse.ArgumentParser:
    # SUPPRESS defaults let the options sit before or after the subcommand without the
    # subcommand's parser overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--tssd",
        metavar="TARGET",
        default=argparse.SUPPRESS,
        help="tssd socket path or http(s) URL (default: $TSSD_URL, $TSSD_HOME/tssd.sock,"
        " /run/tssd/tssd.sock)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="tssctl",
        description="Operator command line of tssd, the tape recall queue manager for dCache.",
        parents=[common],
        **HELP_LAYOUT,
    )
    top = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    for cmd in COMMANDS:
        subparsers = top
        if len(cmd.words) > 1:
            if cmd.words[0] not in groups:
                groups[cmd.words[0]] = _add_group(top, cmd.words[0], common)
            subparsers = groups[cmd.words[0]]
        leaf = subparsers.add_parser(
            cmd.words[-1], help=cmd.help, description=cmd.help, parents=[common], **HELP_LAYOUT
        )
        if cmd.add_arguments:
            cmd.add_arguments(leaf)
        leaf.set_defaults(run=cmd.run)
    return parser


def _add_group(top: Any, name: str, common: argparse.ArgumentParser) -> Any:
    """The parser of `tssctl NAME ACTION ...`, e.g. `tssctl requests list`."""
    default = next((c for c in COMMANDS if c.words == (name, DEFAULT_ACTIONS.get(name))), None)
    if default is None:
        group = top.add_parser(
            name, help=GROUPS.get(name), description=GROUPS.get(name), **HELP_LAYOUT
        )
        return group.add_subparsers(dest=f"{name}_action", metavar="ACTION", required=True)
    # No action: the default one, with its options (`tssctl tapes --sort pending`).
    help = f"{GROUPS.get(name)} (no ACTION: {default.words[1]})"
    group = top.add_parser(name, help=help, description=help, parents=[common], **HELP_LAYOUT)
    if default.add_arguments:
        default.add_arguments(group)
    group.set_defaults(run=default.run)
    return group.add_subparsers(dest=f"{name}_action", metavar="ACTION", required=False)


# --- running a command and mapping its errors to exit codes --------------------------


def dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; every failure ends as one ``tssctl:`` line and an exit code."""
    explicit = getattr(args, "tssd", None)
    try:
        client = Client(explicit)
    except WireError as exc:
        return fail(str(exc), EXIT_FAILED)
    try:
        result: int = args.run(args, client)
        return result
    except WireError as exc:
        return fail(unreachable_message(exc, explicit), EXIT_UNREACHABLE)
    except ApiError as exc:
        return fail(f"{exc.message} (HTTP {exc.status})", api_exit_code(exc.status))
    except KeyboardInterrupt:
        return fail("interrupted (requests already submitted stay in tssd)", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; Python would complain again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except Exception as exc:  # the CLI promises one line, never a traceback
        if os.environ.get("TSSCTL_DEBUG"):
            raise
        return fail(f"unexpected error: {type(exc).__name__}: {exc}", EXIT_FAILED)


def fail(message: str, code: int) -> int:
    """One ``tssctl:`` line on stderr; the message may quote the daemon or a file name."""
    print(f"tssctl: {printable_line(message)}", file=sys.stderr)
    return code


def api_exit_code(status: int) -> int:
    return {400: EXIT_INVALID, 404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(
        status, EXIT_UNREACHABLE if status == 503 else EXIT_FAILED
    )


def target_origin(
    explicit: str | None, environ: dict[str, str] | os._Environ[str], target: str = ""
) -> str:
    if explicit:
        return "from --tssd"
    if environ.get("TSSD_URL"):
        return "from TSSD_URL"
    if target == SYSTEM_SOCKET:
        return "the systemd unit's socket"
    if environ.get("TSSD_HOME"):
        return "from TSSD_HOME"
    return "the default location"


def unreachable_message(exc: WireError, explicit: str | None) -> str:
    target = resolve_target(explicit)
    cause = exc.__cause__
    if not isinstance(cause, OSError | http.client.HTTPException):
        return f"{exc} ({target_origin(explicit, os.environ, target)})"
    reasons: dict[type[Exception], str] = {
        FileNotFoundError: "no such socket",
        ConnectionRefusedError: "connection refused",
        PermissionError: "permission denied",
        TimeoutError: "timed out",
    }
    reason = reasons.get(type(cause), str(cause) or type(cause).__name__)
    return (
        f"cannot reach tssd at {target} ({target_origin(explicit, os.environ, target)}: "
        f"{reason}); "
        "is `tssd serve` running? Point tssctl elsewhere with --tssd TARGET or TSSD_URL"
    )


# --- output and argument types shared by the command modules -------------------------


def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


def positive(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
        return value

    return parse


positive_int = positive(int)
positive_float = positive(float)


def queue_name(text: str) -> str:
    if not QUEUE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a queue name ([A-Za-z0-9_.:-]{{1,64}}): {text!r}")
    return text

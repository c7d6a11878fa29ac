"""``tssctl queues list|set``: named queues, their priority, drive limit, pause flag and
latency target.

The values are kept in the database (the ``queues`` table); the scheduler reads them on
its next pass, so a change applies within a second or so, without a restart.
"""

from __future__ import annotations

import argparse
from typing import Any

from tssd.cli import views
from tssd.cli.commands import (
    EXIT_OK,
    EXIT_USAGE,
    command,
    emit_json,
    fail,
    group,
    queue_name,
    wants_json,
)
from tssd.wire import Client

group(
    "queues", "list queues, or change a queue's priority, drive limit, pause or target",
    default="list",
)  # fmt: skip


@command("queues list", "queues with their settings, queued and active requests")
def queues_list(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", "/v1/queues")
    if wants_json(args):
        emit_json(data)
    else:
        print(views.queues_table(data["queues"]))
    return EXIT_OK


def max_drives(text: str) -> int | None:
    if text.lower() in ("any", "none", "unlimited"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or 'any': {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 (or 'any' for no limit)")
    return value


def target(text: str) -> float | None:
    # Imported here: importing tssd.config loads every settings section, a tenth of a
    # second of every tssctl command's start-up (issue 22: listings within 1 s).
    from tssd.config.queues import TARGET_MAX_S, TARGET_MIN_S, parse_duration

    if text.strip().lower() == "none":
        return None
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not TARGET_MIN_S <= value <= TARGET_MAX_S:
        raise argparse.ArgumentTypeError(
            f"must be {TARGET_MIN_S:.0f} s to {TARGET_MAX_S / 86400:.0f} d (or 'none')"
        )
    return value


def _set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", type=queue_name, metavar="NAME", help="queue (created if new)")
    parser.add_argument("--priority", type=int, metavar="N", help="higher goes first")
    parser.add_argument(
        "--max-drives", type=max_drives, metavar="N", default=argparse.SUPPRESS,
        help="most drives the queue may use at once ('any' = no limit)",
    )  # fmt: skip
    parser.add_argument(
        "--target", type=target, metavar="TIME", default=argparse.SUPPRESS,
        help="latency target: seconds, or 90s, 30m, 1h, 2d ('none' clears it)",
    )  # fmt: skip
    pause = parser.add_mutually_exclusive_group()
    pause.add_argument(
        "--pause", action="store_true",
        help="start none of the queue's recalls or migrations (running sessions finish)",
    )  # fmt: skip
    pause.add_argument("--resume", action="store_true", help="undo --pause")


@command("queues set", "create a queue or change its settings", _set_arguments)
def queues_set(args: argparse.Namespace, client: Client) -> int:
    body: dict[str, Any] = {}
    if args.priority is not None:
        body["priority"] = args.priority
    if "max_drives" in vars(args):
        body["max_drives"] = args.max_drives
    if args.pause or args.resume:
        body["paused"] = bool(args.pause)
    if "target" in vars(args):
        body["latency_target_s"] = args.target
    if not body:
        return fail(
            "nothing to change: give --priority, --max-drives, --target, --pause or --resume",
            EXIT_USAGE,
        )
    data = client.call("PATCH", f"/v1/queues/{args.name}", body)
    if wants_json(args):
        emit_json(data)
    else:
        print(views.queues_table([data["queue"]]))
    return EXIT_OK

"""``tssctl mounts``: the mount history: drive, volume, mount time, files, bytes, efficiency.

Efficiency is the time spent transferring divided by the time the tape was held (from the
mount request to the end of the dismount), as in ``tssd_mount_efficiency``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from tssd.cli import views
from tssd.cli.commands import EXIT_OK, command, emit_json, positive_int, wants_json
from tssd.wire import Client

PAGE_MAX = 10_000


def since_time(text: str) -> datetime:
    try:
        return views.parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=since_time, metavar="T",
                        help="from T: 30m, 2h, 7d ago or an ISO time (default: all)")  # fmt: skip
    parser.add_argument("--until", type=since_time, metavar="T", help="before T")
    parser.add_argument("--drive", metavar="NAME")
    parser.add_argument("--tape", metavar="VOLUME")
    parser.add_argument("--limit", type=positive_int, default=100, metavar="N",
                        help="the newest N mounts (default 100)")  # fmt: skip
    parser.add_argument("--all", action="store_true", help="every mount in the window")


@command("mounts", "mount history: drive, volume, mount s, files, bytes, efficiency", _arguments)
def mounts(args: argparse.Namespace, client: Client) -> int:
    filters: dict[str, Any] = {
        "since": args.since.isoformat() if args.since else None,
        "until": args.until.isoformat() if args.until else None,
        "drive": args.drive,
        "volume": args.tape,
    }
    filters = {k: v for k, v in filters.items() if v}
    if args.all:
        shown = fetch_mounts(client, filters)
    else:
        query = {**filters, "limit": args.limit + 1, "newest": "1"}
        shown = client.call("GET", "/v1/mounts?" + urlencode(query))["mounts"]
    more = not args.all and len(shown) > args.limit
    shown = shown[1:] if more else shown
    if wants_json(args):
        emit_json({"mounts": shown, "more": more})
        return EXIT_OK
    print(views.mounts_table(shown))
    if more:
        print(f"tssctl: only the last {len(shown)} mounts; --all or --limit N", file=sys.stderr)
    return EXIT_OK


def fetch_mounts(client: Client, filters: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after: Any = None
    while True:
        query = {**filters, "limit": PAGE_MAX} | ({"after": after} if after is not None else {})
        data = client.call("GET", "/v1/mounts?" + urlencode(query))
        found.extend(data["mounts"])
        after = data.get("next")
        if after is None:
            return found

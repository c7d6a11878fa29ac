"""``tssctl tapes list|show``: cartridges as tssd sees them: mounts, pending work, drive."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any
from urllib.parse import quote, urlencode

from tssd.cli import views
from tssd.cli.commands import EXIT_OK, command, emit_json, group, positive_int, wants_json
from tssd.cli.render import cell
from tssd.wire import Client

group("tapes", "list tapes, or show one tape's requests and mounts", default="list")
PAGE_MAX = 10_000
SORTS = ("volume", "mounts", "mounts_24h", "pending")


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, default=200, metavar="N", help="at most N")
    parser.add_argument("--after", metavar="VOLUME",
                        help="only volumes named after VOLUME: the next page")  # fmt: skip
    parser.add_argument("--all", action="store_true", help="every tape")
    parser.add_argument(
        "--sort", choices=SORTS, default="volume", help="order (counts: highest first)"
    )


@command("tapes list", "tapes mounted or with pending recalls: mounts, pending, drive",
         _list_arguments)  # fmt: skip
def tapes_list(args: argparse.Namespace, client: Client) -> int:
    # Sorting by a count needs every tape; the API pages by volume name.
    limit = None if args.all or args.sort != "volume" else args.limit
    found, after = fetch_tapes(client, limit, args.after)
    if args.sort != "volume":
        found.sort(key=lambda t: (-t[args.sort], t["volume"]))
        found, after = found[: None if args.all else args.limit], None
    if wants_json(args):
        emit_json({"tapes": found, "next": after})
        return EXIT_OK
    print(views.tapes_table(found))
    if after is not None:
        page = shlex.join(["tssctl", "tapes", "list", "--limit", str(args.limit), "--after", after])
        print(cell(f"tssctl: more tapes; the next page: {page} (or --all)"), file=sys.stderr)
    return EXIT_OK


def fetch_tapes(
    client: Client, limit: int | None, after: Any = None
) -> tuple[list[dict[str, Any]], Any]:
    found: list[dict[str, Any]] = []
    while True:
        page = PAGE_MAX if limit is None else min(PAGE_MAX, limit - len(found))
        query = {"limit": page} | ({"after": after} if after is not None else {})
        data = client.call("GET", "/v1/tapes?" + urlencode(query))
        found.extend(data["tapes"])
        after = data.get("next")
        if after is None or (limit is not None and len(found) >= limit):
            return found, after


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("volume", metavar="VOLUME", help="cartridge volume name")


@command("tapes show", "one tape: counters, requests by state, drive, last mounts",
         _show_arguments)  # fmt: skip
def tapes_show(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", f"/v1/tapes/{quote(args.volume, safe='')}")
    if wants_json(args):
        emit_json(data)
    else:
        print(views.tape_view(data["tape"]))
    return EXIT_OK

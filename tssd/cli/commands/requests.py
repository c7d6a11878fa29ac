"""``tssctl requests list|show|cancel|retry``: single requests, by id or by filter."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any
from urllib.parse import urlencode

from tssd.cli import render
from tssd.cli.commands import (
    EXIT_OK,
    command,
    emit_json,
    group,
    positive_int,
    queue_name,
    wants_json,
)
from tssd.domain import Kind
from tssd.wire import Client

KINDS = tuple(kind.value for kind in Kind)
PAGE_MAX = 1000  # the API's largest page

group("requests", "list, show, cancel and retry requests")


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", choices=render.STATES)
    parser.add_argument("--kind", choices=KINDS)
    parser.add_argument("--queue", type=queue_name)
    parser.add_argument("--tape", metavar="VOLUME", help="requests for files on this volume")
    parser.add_argument("--pnfsid")
    parser.add_argument("--limit", type=positive_int, default=100, metavar="N", help="at most N")
    parser.add_argument("--after", type=positive_int, metavar="ID",
                        help="only requests with an id above ID: the next page")  # fmt: skip
    parser.add_argument("--all", action="store_true", help="page through every match")


#: The list options a next-page command repeats, by their attribute.
FILTER_OPTIONS = {"state": "--state", "kind": "--kind", "queue": "--queue", "tape": "--tape",
                  "pnfsid": "--pnfsid"}  # fmt: skip


@command("requests list", "list requests, oldest first", _list_arguments)
def requests_list(args: argparse.Namespace, client: Client) -> int:
    filters = {
        "state": args.state,
        "kind": args.kind,
        "queue": args.queue,
        "volume": args.tape,
        "pnfsid": args.pnfsid,
    }
    limit = None if args.all else args.limit
    wanted = {k: v for k, v in filters.items() if v}
    found, after = fetch_requests(client, wanted, limit, args.after)
    if wants_json(args):
        emit_json({"requests": found, "next": after})
        return EXIT_OK
    print(render.request_table(found))
    if after is not None:
        more = f"more requests match; the next page: {next_page(args, after)} (or --all)"
        print(render.cell(f"tssctl: {more}"), file=sys.stderr)
    return EXIT_OK


def next_page(args: argparse.Namespace, after: Any) -> str:
    """The command that lists the page after this one: same filters and limit."""
    words = ["tssctl", "requests", "list"]
    for attribute, option in FILTER_OPTIONS.items():
        if getattr(args, attribute):
            words += [option, str(getattr(args, attribute))]
    words += ["--limit", str(args.limit), "--after", str(after)]
    return shlex.join(words)


def fetch_requests(
    client: Client, filters: dict[str, Any], limit: int | None, after: Any = None
) -> tuple[list[dict[str, Any]], Any]:
    """Up to ``limit`` matches (all when None) with an id above *after*, and the API's
    ``next`` cursor after them."""
    found: list[dict[str, Any]] = []
    while True:
        page = PAGE_MAX if limit is None else min(PAGE_MAX, limit - len(found))
        query = {**filters, "limit": page} | ({"after": after} if after is not None else {})
        data = client.call("GET", "/v1/requests?" + urlencode(query))
        found.extend(data["requests"])
        after = data.get("next")
        if after is None or (limit is not None and len(found) >= limit):
            return found, after


def _id_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=positive_int, metavar="ID", help="request id")


@command("requests show", "every field of one request", _id_argument)
def requests_show(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", f"/v1/requests/{args.id}")
    if wants_json(args):
        emit_json(data)
    else:
        print(render.request(data["request"]))
    return EXIT_OK


@command("requests cancel", "cancel a queued or active request", _id_argument)
def requests_cancel(args: argparse.Namespace, client: Client) -> int:
    return _change(args, client, "cancel")


@command("requests retry", "queue a failed or cancelled request again", _id_argument)
def requests_retry(args: argparse.Namespace, client: Client) -> int:
    return _change(args, client, "retry")


def _change(args: argparse.Namespace, client: Client, action: str) -> int:
    data = client.call("POST", f"/v1/requests/{args.id}/{action}")
    if wants_json(args):
        emit_json(data)
    else:
        print(f"request {args.id}: {render.cell(data['request'].get('state'))}")
    return EXIT_OK

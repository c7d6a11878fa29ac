"""``tssctl why ID``: the rule a request waits on, in words, and its expected finish."""

from __future__ import annotations

import argparse

from tssd.cli import views
from tssd.cli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    command,
    emit_json,
    fail,
    positive_int,
    wants_json,
)
from tssd.wire import ApiError, Client


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=positive_int, metavar="ID", help="request id")


@command("why", "why a request is waiting, and its ETA", _arguments)
def why(args: argparse.Namespace, client: Client) -> int:
    try:
        data = client.call("GET", f"/v1/requests/{args.id}/why")
    except ApiError as exc:
        # An unknown request is a NotFound error; a daemon without the route answers a
        # plain 404, which deserves a clearer word than "Not Found".
        if exc.status == 404 and exc.type != "NotFound":
            return fail("this tssd cannot explain waits (no /v1/requests/ID/why);"
                        " upgrade it, or see tssctl requests show ID", EXIT_FAILED)  # fmt: skip
        raise
    if wants_json(args):
        emit_json(data)
    else:
        print(views.why_view(data))
    return EXIT_OK

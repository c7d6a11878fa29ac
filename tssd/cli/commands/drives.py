"""``tssctl drives list|enable|disable``: the tape drives and taking one out of service.

Disabling a drive lets the session on it finish, starts no new one, then dismounts its
tape so that the tape's queue can move to another drive. The flag is kept in the
database and survives a restart.
"""

from __future__ import annotations

import argparse

from tssd.cli import views
from tssd.cli.commands import EXIT_OK, command, emit_json, group, wants_json
from tssd.wire import Client

group("drives", "list drives, or take one out of service and back", default="list")


@command("drives list", "drives: enabled, state, tape, mounts in the last 24 h, last error")
def drives_list(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", "/v1/drives")
    if wants_json(args):
        emit_json(data)
    else:
        print(views.drives_table(data["drives"]))
    return EXIT_OK


def _name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="drive name (tssctl drives list)")


@command("drives enable", "put a drive back in service", _name)
def drives_enable(args: argparse.Namespace, client: Client) -> int:
    return _switch(args, client, "enable")


@command("drives disable", "take a drive out of service (its session finishes first)", _name)
def drives_disable(args: argparse.Namespace, client: Client) -> int:
    return _switch(args, client, "disable")


def _switch(args: argparse.Namespace, client: Client, action: str) -> int:
    data = client.call("POST", f"/v1/drives/{args.name}/{action}")
    if wants_json(args):
        emit_json(data)
    else:
        print(views.drives_table([data["drive"]]))
    return EXIT_OK

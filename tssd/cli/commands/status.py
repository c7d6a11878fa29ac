"""``tssctl status``: one screen of daemon, queues, drives, pending counts and throughput."""

from __future__ import annotations

import argparse

from tssd.cli import render
from tssd.cli.commands import EXIT_OK, command, emit_json, wants_json
from tssd.cli.instances import instances_table
from tssd.wire import Client


@command("status", "daemon, queues, drives, pending counts and throughput")
def status(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", "/v1/status")
    if wants_json(args):
        emit_json(data)
    else:
        print(render.status(data))
        if instances := instances_table(data.get("instances") or []):
            print("\n" + instances)
    return EXIT_OK

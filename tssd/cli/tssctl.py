"""tssctl: the operator command line of tssd.

It talks to a running tssd over its HTTP API (docs/api.md) with the standard-library
client in :mod:`tssd.wire`, found like ``tss-hsm`` finds it (:mod:`tssd.shim.endpoint`):
``--tssd TARGET`` (socket path or http(s) URL), else ``$TSSD_URL``, else the state
directory's ``tssd.sock`` when it exists, else the systemd unit's ``/run/tssd/tssd.sock``
when it exists. Human tables by default; ``--json`` prints the API's own JSON objects for
scripts.

The subcommands live in :mod:`tssd.cli.commands`, one module per group, together with the
registry, the exit codes and the error mapping; this module only wires them up.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from tssd.cli.commands import EXIT_USAGE, build_parser, dispatch

# Modules of tssd.cli.commands, imported by name because importing one registers its
# commands and the import order is the order of --help (a sorted import list would not be).
COMMAND_MODULES = (
    "status", "requests", "recall", "why", "queues", "drives", "tapes", "mounts", "report",
    "catalog", "backend", "top",
)  # fmt: skip
for _name in COMMAND_MODULES:
    importlib.import_module(f"tssd.cli.commands.{_name}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())

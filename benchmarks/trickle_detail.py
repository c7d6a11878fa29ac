"""Run a ``tssd simulate`` campaign and keep what its report sums up: each request's
arrival and end, and every mount (drive, volume, times, files).

Usage: python benchmarks/trickle_detail.py OUT.json -- SIMULATE-ARGS...

SIMULATE-ARGS are those of ``tssd simulate`` (``--catalog``, ``--requests``,
``--profile``, ``--config``, ``--set``...); the campaign runs through the same
``run_campaign`` with the same options. OUT.json holds ``requests`` (pnfsid, queue, at, end)
and ``mounts`` (drive, volume, requested, ready, ended, files), for studying where a
latency target's late requests wait (docs/benchmarks.md, latency targets).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tssd.cli.daemon import _simulate_options, build_parser
from tssd.simulate.campaign import load_requests
from tssd.simulate.runner import run_campaign
from tssd.simulate.vloop import run_virtual


def main() -> None:
    out, rest = Path(sys.argv[1]), sys.argv[sys.argv.index("--") + 1 :]
    args = build_parser().parse_args(["simulate", *rest])
    options = _simulate_options(args)
    arrivals = load_requests(options.requests)
    text = options.catalog.read_text(encoding="utf-8")
    outcome = run_virtual(lambda: run_campaign(options, arrivals, text))
    done = outcome.finished_at
    requests = [
        {
            "pnfsid": a.pnfsid,
            "queue": a.queue,
            "at": a.at,
            "end": done.get(outcome.request_of.get(a.index, -1)),
        }
        for a in arrivals
    ]
    mounts = [
        {"drive": m.drive, "volume": m.volume, "requested": m.requested, "ready": m.ready,
         "ended": m.ended, "files": m.files}
        for m in outcome.mounts
    ]  # fmt: skip
    out.write_text(json.dumps({"requests": requests, "mounts": mounts}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

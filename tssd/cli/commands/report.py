"""``tssctl report efficiency``: mounts, files and bytes per mount, efficiency and remounts,
overall and per drive, per queue and per tape; ``--plot`` draws throughput and mounts
over time (needs matplotlib: ``pip install matplotlib`` into tssd's environment, which
works for a checkout and an installed tssd alike; without it the report is printed and
the plot is not drawn)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tssd.cli import render, views
from tssd.cli.commands import EXIT_FAILED, EXIT_OK, command, emit_json, fail, group, wants_json
from tssd.cli.commands.mounts import since_time
from tssd.wire import Client

group("report", "reports from the mount history")
PLOT_BINS = 60


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=since_time, required=True, metavar="T",
                        help="from T: 30m, 2h, 7d ago or an ISO time")  # fmt: skip
    parser.add_argument("--until", type=since_time, metavar="T", help="before T (default: now)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw throughput and mounts over time into FILE.png")  # fmt: skip


@command("report efficiency", "per drive, queue and tape: mounts, files and bytes per mount,"
         " efficiency, remounts per day", _arguments)  # fmt: skip
def report_efficiency(args: argparse.Namespace, client: Client) -> int:
    until = args.until or datetime.now(UTC)
    query = {"since": args.since.isoformat(), "until": until.isoformat()}
    if args.plot:
        query["bins"] = str(PLOT_BINS)
    data = client.call("GET", "/v1/report/efficiency?" + urlencode(query), timeout=300)
    problem = draw(data, args.plot) if args.plot else None
    if wants_json(args):
        emit_json(data)
    else:
        print(views.report_view(data))
        if args.plot and problem is None:
            print(f"\nplot written to {args.plot}")
    # The report is shown either way; the plot asked for and not drawn is still a failure.
    return EXIT_OK if problem is None else fail(problem, EXIT_FAILED)


def draw(data: dict[str, Any], path: str) -> str | None:
    """Plot into *path*; None when drawn, else why not (one line)."""
    try:
        plot(data, Path(path))
    except ImportError:
        # This interpreter's pip: right for a checkout and an installed tssd alike.
        hint = f"{sys.executable} -m pip install matplotlib"
        return f"{path} not drawn: --plot needs matplotlib: {hint}"
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def plot(report: dict[str, Any], path: Path) -> None:
    """Throughput (MB/s) and mounts per bin over the report's window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    line = report["timeline"]
    start = datetime.fromisoformat(line["start"])
    width = float(line["bin_s"])
    span = width * len(line["bytes"])
    scale, unit = (3600.0, "hours") if span > 3 * 3600 else (60.0, "minutes")
    if span <= 600:
        scale, unit = 1.0, "seconds"
    x = [i * width / scale for i in range(len(line["bytes"]))]
    rate = [b / width / 1e6 if width > 0 else 0 for b in line["bytes"]]
    fig, top = plt.subplots(figsize=(10, 5))
    top.step(x, rate, where="post", color="tab:blue", label="throughput")
    top.fill_between(x, rate, step="post", alpha=0.25, color="tab:blue")
    top.set_xlabel(f"{unit} since {start:%Y-%m-%d %H:%M:%S} UTC")
    top.set_ylabel("throughput (MB/s)", color="tab:blue")
    mounts = top.twinx()
    mounts.bar(x, line["mounts"], width=width / scale * 0.8, align="edge", alpha=0.5,
               color="tab:orange", label="mounts")  # fmt: skip
    mounts.set_ylabel(f"mounts per {width:.3g} s", color="tab:orange")
    total = report["total"]
    top.set_title(
        f"{total['mounts']} mounts, {total['files']} files, {render.human_size(total['bytes'])},"
        f" efficiency {views.percent(total.get('efficiency'))}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

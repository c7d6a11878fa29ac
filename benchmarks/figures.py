"""The figures of docs/benchmarks.md, drawn from fresh simulations: one command.

Usage: python benchmarks/figures.py OUTDIR [--profile lto9] [--scale 1.0]
           [--targets 900,1800,3600,7200,14400]

Generates the seed-1 campaigns (``benchmarks/campaigns.py``), runs them with ``tssd
simulate``'s own runner and writes three PNGs (needs matplotlib, the ``plot`` extra):

- ``tradeoff.png``: urgent p95 against bulk slowdown on the trickle campaign, one point
  per latency target, beside tss and a drive reserved for the urgent queue;
- ``throughput.png``: recall throughput over the GridKa campaign, tssd against tss;
- ``mounts-per-tape.png``: mounts of each tape on the duplicates campaign and on the
  trickle at a 3,600 s target, tssd against tss.

Prints each run's figures as JSON lines. ``--scale 0.1`` makes small campaigns for a quick
look (the published figures are at 1.0).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tssd.config.queues import QueueSettings
from tssd.logs import configure_logging
from tssd.simulate.command import run as run_simulation
from tssd.simulate.report import throughput_series
from tssd.simulate.runner import Options, Outcome

HERE = Path(__file__).resolve().parent


@dataclass
class Run:
    label: str
    outcome: Outcome
    report: dict[str, Any]


def campaign(name: str, root: Path, scale: float) -> Path:
    out = root / name
    command = [sys.executable, str(HERE / "campaigns.py"), name, str(out), "--seed", "1"]
    subprocess.run([*command, "--scale", str(scale)], check=True, stdout=subprocess.DEVNULL)
    return out


def simulate(label: str, where: Path, options: dict[str, Any]) -> Run:
    opts = Options(catalog=where / "catalog.csv", requests=where / "requests.csv", **options)
    outcome, report = run_simulation(opts)
    print(json.dumps({"run": label, **{k: report[k] for k in ("makespan_s", "mounts")}}))
    return Run(label, outcome, report)


def urgent_queue(target_s: float | None) -> tuple[QueueSettings, ...]:
    given = frozenset({"latency_target_s"} if target_s else set())
    return (QueueSettings(name="urgent", latency_target_s=target_s, given=given),)


def tradeoff(trickle: Path, base: dict[str, Any], targets: list[float], bulk_s: float) -> dict:
    # The campaign's bulk requests are in queue "default": nine drives for it leave one
    # to "urgent" besides its priority.
    reserved = QueueSettings(
        "default", max_drives=base["drives"] - 1, given=frozenset({"max_drives"})
    )
    runs = {
        "tss (no priority, no target)": simulate("trickle tss", trickle, base | {"policy": "tss"}),
        "one drive reserved for urgent": simulate(
            "trickle reserved", trickle, base | {"queues": (reserved,)}
        ),
    }
    for target in targets:
        runs[f"target {target:,.0f} s"] = simulate(
            f"trickle {target:.0f}", trickle, base | {"queues": urgent_queue(target)}
        )
    points = {}
    for label, run in runs.items():
        queues = run.report["queues"]
        slowdown = queues["default"]["last_s"] / bulk_s - 1
        points[label] = (queues["urgent"]["p95_s"], slowdown, run)
        row = {
            "tradeoff": label,
            "urgent_p95_s": queues["urgent"]["p95_s"],
            "within_target": queues["urgent"]["within_target"],
            "last_bulk_s": queues["default"]["last_s"],
            "bulk_slowdown": round(slowdown, 4),
            "mounts": run.report["mounts"],
        }
        print(json.dumps(row))
    return points


def draw_tradeoff(points: dict, profile: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for index, (label, (p95, slowdown, _)) in enumerate(points.items()):
        marker = "o" if label.startswith("target") else "s"
        ax.scatter(slowdown * 100, p95 / 3600, marker=marker)
        # Neighbouring targets can land close together: their labels go left and right.
        offset = (6, 4) if index % 2 else (-6, -12)
        align = "left" if index % 2 else "right"
        ax.annotate(label, (slowdown * 100, p95 / 3600), textcoords="offset points",
                    xytext=offset, ha=align, fontsize=8)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("bulk slowdown: last bulk file against the campaign without urgent work (%)")
    ax.set_ylabel("urgent recalls, 95th percentile (hours)")
    ax.set_title(f"Urgent latency against bulk throughput ({profile}, 10 drives)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_throughput(runs: list[Run], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 4))
    for run in runs:
        hours, rate = throughput_series(run.outcome)
        ax.step(hours, rate, where="post", label=f"{run.label}: {run.report['makespan_s']:,.0f} s")
    ax.set_xlabel("hours since start")
    ax.set_ylabel("recall throughput (MB/s)")
    ax.set_title("GridKa campaign: 30,000 recalls on 60 tapes, 10 drives")
    ax.legend(loc="lower center")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_mounts(panels: list[tuple[str, list[Run]]], path: Path) -> None:
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 4))
    for ax, (title, runs) in zip(axes, panels, strict=True):
        for run in runs:
            per_tape = collections.Counter(m.volume for m in run.outcome.mounts)
            counts = sorted(per_tape.values(), reverse=True)
            total = list(itertools.accumulate(counts))
            label = f"{run.label}: {total[-1]} mounts of {len(counts)} tapes"
            ax.step(range(1, len(counts) + 1), total, where="post", label=label)
        ax.set_xlabel("tapes mounted, most mounted first")
        ax.set_ylabel("mounts, cumulative")
        ax.set_title(title)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--profile", default="lto9")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--targets", default="900,1800,3600,7200,14400")
    args = parser.parse_args()
    args.outdir.mkdir(parents=True, exist_ok=True)
    configure_logging("error")
    base: dict[str, Any] = {"profile": args.profile, "drives": 10}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gridka = campaign("gridka", root, args.scale)
        bulk = [simulate("tssd", gridka, base), simulate("tss", gridka, base | {"policy": "tss"})]
        draw_throughput(bulk, args.outdir / "throughput.png")
        targets = [float(t) for t in args.targets.split(",")]
        points = tradeoff(campaign("trickle", root, args.scale), base, targets,
                          bulk[0].report["makespan_s"])  # fmt: skip
        draw_tradeoff(points, args.profile, args.outdir / "tradeoff.png")
        duplicates = campaign("duplicates", root, args.scale)
        dup = [simulate("tssd", duplicates, base),
               simulate("tss", duplicates, base | {"policy": "tss"})]  # fmt: skip
        trickle_runs = [points["target 3,600 s"][2], points["tss (no priority, no target)"][2]]
        trickle_runs[0].label, trickle_runs[1].label = "tssd, target 3,600 s", "tss"
        draw_mounts(
            [("duplicates campaign", dup), ("trickle campaign", trickle_runs)],
            args.outdir / "mounts-per-tape.png",
        )


if __name__ == "__main__":
    main()

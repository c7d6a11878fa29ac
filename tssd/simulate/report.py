"""The JSON report of a simulated campaign (keys: docs/benchmarks.md) and its throughput plot."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tssd.errors import ConfigError
from tssd.simulate.runner import Options, Outcome

MB = 1e6


def build_report(options: Options, outcome: Outcome, lower_bound_s: float) -> dict[str, Any]:
    done = [r for r in outcome.requests if r.state == "done"]
    failed = [r for r in outcome.requests if r.state == "failed"]
    nbytes = sum(r.size or 0 for r in done)
    makespan = outcome.makespan_s
    mounts = outcome.mounts
    volumes = {m.volume for m in mounts}
    held = sum(_end(m.unload, makespan) - m.ready for m in mounts)
    busy = sum(_end(m.ended, makespan) - m.requested for m in mounts)
    transfer = sum(m.transfer_s for m in mounts)
    return {
        "files": len(done),
        "bytes": nbytes,
        "failed": len(failed),
        "makespan_s": round(makespan, 3),
        "throughput_mb_s": round(nbytes / MB / makespan, 3) if makespan > 0 else 0.0,
        "mounts": len(mounts),
        "tapes_mounted": len(volumes),
        "remounts": len(mounts) - len(volumes),
        "files_per_mount": round(len(done) / len(mounts), 3) if mounts else 0.0,
        "bytes_per_mount": round(nbytes / len(mounts)) if mounts else 0,
        "mount_efficiency": round(transfer / held, 4) if held > 0 else 0.0,
        "drive_utilization": round(busy / (options.drives * makespan), 4) if makespan else 0.0,
        "lower_bound_s": round(lower_bound_s, 3),
        "latency_s": _latency(outcome),
        "locate_s": round(sum(m.locate_s for m in mounts), 3),
        "queues": _per_queue(outcome, {q.name: q.latency_target_s for q in options.queues}),
        "peak_pending": outcome.peak_pending,
        "sessions": outcome.sessions,
        "wall_s": round(outcome.wall_s, 3),
        "policy": options.policy,
        "profile": options.profile,
        "drives": options.drives,
        "window": options.window,
    }


def _end(value: float | None, makespan: float) -> float:
    return makespan if value is None else min(value, makespan)


def _latency(outcome: Outcome) -> dict[str, float]:
    waits = sorted(
        outcome.finished_at[rid] - a.at
        for a in outcome.arrivals
        if (rid := outcome.request_of.get(a.index)) is not None and rid in outcome.finished_at
    )
    return {
        "p50": _quantile(waits, 0.50),
        "p95": _quantile(waits, 0.95),
        "p99": _quantile(waits, 0.99),
        "max": round(waits[-1], 3) if waits else 0.0,
    }


def _per_queue(outcome: Outcome, targets: dict[str, float | None]) -> dict[str, dict[str, Any]]:
    """Per queue: files, bytes, when its last file finished, latency quantiles, and its
    latency target: ``target_s``, ``met`` (p95 within the target) and ``within_target``
    (the share of its files done within it); None for a queue without a target."""
    rows = {r.id: r for r in outcome.requests}
    waits: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    last: dict[str, float] = {}
    for a in outcome.arrivals:
        rid = outcome.request_of.get(a.index)
        if rid is None or rid not in outcome.finished_at:
            continue
        done = outcome.finished_at[rid]
        waits.setdefault(a.queue, []).append(done - a.at)
        row = rows.get(rid)
        sizes[a.queue] = sizes.get(a.queue, 0) + ((row.size or 0) if row is not None else 0)
        last[a.queue] = max(last.get(a.queue, 0.0), done)
    return {
        q: {
            "files": len(w), "bytes": sizes[q], "last_s": round(last[q], 3),
            "p50_s": _quantile(sorted(w), 0.50), "p95_s": _quantile(sorted(w), 0.95),
            **_against(sorted(w), targets.get(q)),
        }
        for q, w in sorted(waits.items())
    }  # fmt: skip


def _against(waits: Sequence[float], target_s: float | None) -> dict[str, Any]:
    if target_s is None:
        return {"target_s": None, "met": None, "within_target": None}
    within = sum(1 for w in waits if w <= target_s) / len(waits)
    return {
        "target_s": target_s,
        "met": _quantile(waits, 0.95) <= target_s,
        "within_target": round(within, 4),
    }


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
    return round(values[index], 3)


def throughput_series(outcome: Outcome, bins: int = 200) -> tuple[list[float], list[float]]:
    """(bin start in hours, MB/s in that bin) from when each file finished."""
    sizes = {r.id: r.size or 0 for r in outcome.requests if r.state == "done"}
    span = max(outcome.makespan_s, 1.0)
    width = span / bins
    totals = [0.0] * bins
    for request_id, at in outcome.finished_at.items():
        totals[min(bins - 1, int(at / width))] += sizes.get(request_id, 0)
    return [i * width / 3600 for i in range(bins)], [t / MB / width for t in totals]


def plot(outcome: Outcome, report: dict[str, Any], path: Path) -> None:
    """Throughput over time, like Figure 2 of the GridKa paper."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        # This interpreter's pip: right for a checkout and an installed tssd alike.
        hint = f"{sys.executable} -m pip install matplotlib"
        raise ConfigError(f"--plot needs matplotlib: {hint}") from exc
    hours, rate = throughput_series(outcome)
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.fill_between(hours, rate, step="post", alpha=0.6)
    mean = report["throughput_mb_s"]
    ax.axhline(mean, color="black", linestyle="--", linewidth=1, label=f"mean {mean:.0f} MB/s")
    ax.set_xlabel("hours since start")
    ax.set_ylabel("recall throughput (MB/s)")
    ax.set_title(
        f"{report['policy']} on {report['profile']}, {report['drives']} drives, "
        f"window {report['window'] or 'unlimited'}: {report['files']} files, "
        f"{report['mounts']} mounts"
    )
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

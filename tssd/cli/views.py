"""Human views of the operator objects: queues, drives, tapes, mounts, reports, waits.

Each function takes the API's JSON (docs/api.md) and returns text; the tables come from
:func:`tssd.cli.render.table`, so they fit the terminal (100 columns into a pipe).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from tssd.cli.render import (
    NONE,
    age,
    human_duration,
    human_size,
    key_values,
    parse_time,
    table,
    when,
)
from tssd.scheduler.rules import RULES as WHY_RULES

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``2h``, ``30m``, ``7d``, ``1w`` ago, or an ISO 8601 time (UTC when naive)."""
    now = now or datetime.now(UTC)
    match = _RELATIVE.fullmatch(text.strip().lower())
    if match:
        return now - timedelta(seconds=float(match[1]) * _UNIT_S[match[2]])
    parsed = parse_time(text.strip())
    if parsed is None:
        raise ValueError(f"not a time: {text!r} (use e.g. 2h, 30m, 7d or 2026-11-30T00:00)")
    return parsed


def percent(value: float | None) -> str:
    return NONE if value is None else f"{100 * value:.1f}%"


def seconds(value: float | None) -> str:
    if value is None:
        return NONE
    return f"{value:.1f}s" if value < 60 else human_duration(value)


# --- queues and drives -----------------------------------------------------------------


def queues_table(queues: list[dict[str, Any]]) -> str:
    rows = [
        [
            q["name"],
            q.get("priority"),
            q.get("max_drives") or "any",
            q.get("paused"),
            human_duration(q.get("latency_target_s")),
            q.get("queued", 0),
            q.get("active", 0),
            human_size(q.get("queued_bytes", 0) + q.get("active_bytes", 0)),
            age(q.get("oldest_queued_at")),
        ]
        for q in queues
    ]
    headers = ["QUEUE", "PRIORITY", "MAX DRIVES", "PAUSED", "TARGET", "QUEUED", "ACTIVE", "BYTES",
               "OLDEST"]  # fmt: skip
    return table(headers, rows, right=(1, 2, 4, 5, 6, 7, 8))


def drives_table(drives: list[dict[str, Any]]) -> str:
    rows = [
        [
            d["name"],
            d.get("enabled"),
            d.get("state"),
            d.get("volume"),
            d.get("mounts_24h", 0),
            when(d.get("last_mount_at")),
            d.get("last_error"),
        ]
        for d in drives
    ]
    headers = ["DRIVE", "ENABLED", "STATE", "VOLUME", "MOUNTS 24H", "LAST MOUNT", "LAST ERROR"]
    if any("positioning" in d for d in drives):  # SCSI drives: LOCATE or spacing filemarks
        headers.append("POSITIONING")
        for row, d in zip(rows, drives, strict=True):
            row.append(d.get("positioning"))
    return table(headers, rows, right=(4,))


# --- tapes and mounts ------------------------------------------------------------------


def tapes_table(tapes: list[dict[str, Any]]) -> str:
    rows = [
        [
            t["volume"],
            t.get("state"),
            t.get("mounts", 0),
            t.get("mounts_24h", 0),
            t.get("pending", 0),
            human_size(t.get("pending_bytes", 0)),
            t.get("drive"),
            when(t.get("last_mounted_at")),
        ]
        for t in tapes
    ]
    headers = ["VOLUME", "STATE", "MOUNTS", "24H", "PENDING", "BYTES", "DRIVE", "LAST MOUNTED"]
    return table(headers, rows, right=(2, 3, 4, 5))


def tape_view(tape: dict[str, Any]) -> str:
    head = key_values(
        [
            ("volume", tape["volume"]),
            ("state", tape.get("state")),
            ("in drive", tape.get("drive")),
            ("mounts (all time)", tape.get("mounts")),
            ("mounts (last 24 h)", tape.get("mounts_24h")),
            ("last mounted", tape.get("last_mounted_at")),
        ]
    )
    states = tape.get("requests") or {}
    rows = [[s, v["count"], human_size(v["bytes"])] for s, v in sorted(states.items())]
    parts = [head, table(["REQUESTS", "COUNT", "BYTES"], rows, right=(1, 2))]
    if tape.get("history"):
        parts.append(mounts_table(tape["history"]))
    return "\n\n".join(parts)


def mounts_table(mounts: list[dict[str, Any]]) -> str:
    rows = [
        [
            m["id"],
            m.get("drive"),
            m.get("volume"),
            when(m.get("requested_at")),
            seconds(m.get("mount_s")),
            "mounted" if m.get("open") else seconds(m.get("session_s")),
            m.get("files", 0),
            human_size(m.get("bytes", 0)),
            percent(m.get("efficiency")),
        ]
        for m in mounts
    ]
    headers = ["ID", "DRIVE", "VOLUME", "STARTED", "MOUNT", "HELD", "FILES", "BYTES", "EFFIC."]
    return table(headers, rows, right=(0, 4, 5, 6, 7, 8))


# --- the efficiency report -------------------------------------------------------------

_GROUP = ["MOUNTS", "REMOUNTS/D", "FILES", "BYTES", "FILES/MNT", "BYTES/MNT", "EFFIC.", "MOUNT"]


def _group_row(name: str, g: dict[str, Any]) -> list[Any]:
    return [
        name,
        g["mounts"],
        f"{g['remounts_per_day']:.1f}",
        g["files"],
        human_size(g["bytes"]),
        f"{g['files_per_mount']:.1f}",
        human_size(g["bytes_per_mount"]),
        percent(g.get("efficiency")),
        seconds(g.get("mount_s_median")),
    ]


def report_view(report: dict[str, Any]) -> str:
    total = report["total"]
    head = key_values(
        [
            ("window", f"{report['since']} .. {report['until']} ({report['days']:.2f} days)"),
            ("mounts", f"{total['mounts']} of {total['tapes']} tapes"),
            ("remounts", f"{total['remounts']} ({total['remounts_per_day']:.1f} per day)"),
            ("files", total["files"]),
            ("bytes", human_size(total["bytes"])),
            ("files per mount", f"{total['files_per_mount']:.1f}"),
            ("bytes per mount", human_size(total["bytes_per_mount"])),
            ("mount efficiency", percent(total.get("efficiency"))),
            ("mount time median", seconds(total.get("mount_s_median"))),
            ("mount time max", seconds(total.get("mount_s_max"))),
        ]
    )
    right = range(1, 9)
    parts = [head]
    for title, key, name in (
        ("DRIVE", "drives", "drive"),
        ("QUEUE", "queues", "queue"),
        ("TAPE", "tapes", "volume"),
    ):
        if report.get(key):
            rows = [_group_row(g[name], g) for g in report[key]]
            parts.append(table([title, *_GROUP], rows, right=right))
    return "\n\n".join(parts)


# --- why a request waits ---------------------------------------------------------------

#: The one-line meaning of each ``why`` rule, from the one table (scheduler/rules.py).
RULES = {name: rule.meaning for name, rule in WHY_RULES.items()}


def why_view(why: dict[str, Any]) -> str:
    rule = why.get("rule") or "?"
    eta_s = why.get("eta_s")
    eta = NONE
    if why.get("eta"):
        eta = f"{why['eta']} (in {human_duration(eta_s)})" if eta_s is not None else why["eta"]
    elif eta_s is not None:
        eta = f"in {human_duration(eta_s)}"
    return key_values(
        [
            ("request", why.get("id")),
            ("state", why.get("state")),
            ("rule", rule),
            ("meaning", RULES.get(rule, "-")),
            ("detail", why.get("detail")),
            ("ETA", eta),
            *_target_lines(why),
        ]
    )


def _target_lines(why: dict[str, Any]) -> list[tuple[str, Any]]:
    """The queue's latency target and the ETA against it (nothing without a target)."""
    target_s = why.get("target_s")
    if target_s is None:
        return []
    slack = why.get("slack_s")
    if slack is None:
        verdict = "unknown (no ETA yet)"
    elif slack >= 0:
        verdict = f"on target, {human_duration(slack)} to spare"
    else:
        verdict = f"LATE by {human_duration(-slack)}"
    return [
        ("queue target", f"{human_duration(target_s)} (queue {why.get('queue')})"),
        ("deadline", why.get("deadline") or NONE),
        ("against target", verdict),
    ]

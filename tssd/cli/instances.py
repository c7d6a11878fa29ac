"""``tssctl status``: the instances sharing the database, their drives and heartbeats."""

from __future__ import annotations

from typing import Any

from tssd.cli.render import human_duration, table


def instances_table(instances: list[dict[str, Any]]) -> str | None:
    """The INSTANCE table, or None for a lone instance on its own database (nothing new)."""
    if not any(i.get("started_at") for i in instances) and len(instances) < 2:
        return None
    rows = [
        [
            ("* " if i.get("self") else "") + str(i["id"]),
            i.get("host"),
            i.get("pid"),
            i.get("state"),
            human_duration(i.get("heartbeat_age_s")) + " ago",
            _drives(i.get("drives") or []),
        ]
        for i in instances
    ]
    return table(["INSTANCE", "HOST", "PID", "STATE", "HEARTBEAT", "DRIVES"], rows, (2,))


def _drives(drives: list[dict[str, Any]]) -> str:
    return (
        " ".join(
            f"{d['name']}:{d['volume']}" if d.get("volume") else str(d["name"]) for d in drives
        )
        or "-"
    )

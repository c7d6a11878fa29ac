"""The log events of several instances on one database (declared as tssd/log_events.py says)."""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("cluster.joined", "cluster.left", "cluster.listening"),
        "info",
        "this instance joined / left the cluster (docs/scaling.md)",
    ),
    LogEvent(
        ("cluster.heartbeat_failed",),
        "warning",
        "a heartbeat could not be written",
        "check the database",
    ),
    LogEvent(
        ("cluster.fenced",),
        "critical",
        "this instance lost its lease and stops working",
        "check the database; restart",
    ),
    LogEvent(
        ("cluster.instance_reaped", "cluster.requests_requeued"),
        "warning",
        "a dead instance's work was taken back",
        "check why it died",
    ),
    LogEvent(
        ("cluster.volume_taken", "cluster.volume_released"),
        "info",
        "tape claims between instances",
    ),
)

"""The log events of several instances on one database.

Declared once here; docs/reference/log-events.md is generated from the declarations
(``python -m tssd.reference docs/reference``) and tests/unit/test_reference_docs.py fails
when an event the code logs (a ``log.<level>("name", ...)`` call) is declared nowhere.
Links in ``action`` point at sections of docs/operations.md.
"""

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

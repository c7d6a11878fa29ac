"""The log events of the ENDIT directories.

Declared once here; docs/reference/log-events.md is generated from the declarations
(``python -m tssd.reference docs/reference``) and tests/unit/test_reference_docs.py fails
when an event the code logs (a ``log.<level>("name", ...)`` call) is declared nowhere.
Links in ``action`` point at sections of docs/operations.md.
"""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("endit.orphan_removed",),
        "info",
        (
            "a file in ENDIT `in/` whose request file stayed away for `endit.cancel_grace_s` was "
            "removed"
        ),
    ),
    LogEvent(
        ("endit.started", "endit.stopped"),
        "info",
        "ENDIT directories served",
    ),
    LogEvent(
        ("endit.missing_dirs", "endit.inotify_unavailable", "endit.watch_failed"),
        "warning",
        "ENDIT directory problems (rescans continue)",
        "check the directories",
    ),
    LogEvent(
        ("endit.stages_recorded", "endit.staged", "endit.stages_cancelled", "endit.orphan_removed"),
        "info",
        "ENDIT stage intake and results",
    ),
    LogEvent(
        ("endit.stage_failed", "endit.err_write_failed"),
        "warning / error",
        "a stage failed / its error file could not be written",
        "check the pool directory",
    ),
    LogEvent(
        ("endit.stage_paused", "endit.stage_resumed"),
        "warning / info",
        "stages wait for free space in `in/`",
        "free space on the pool",
    ),
    LogEvent(
        ("endit.statvfs_failed",),
        "warning",
        "free space of `in/` unknown",
        "check the file system",
    ),
    LogEvent(
        ("endit.flushes_recorded", "endit.flushed"),
        "info",
        "ENDIT flush intake and results",
    ),
    LogEvent(
        ("endit.flush_failed", "endit.flush_held"),
        "error",
        "a flush failed / is held",
        "check the pool directory and the backend",
    ),
    LogEvent(
        ("endit.removes_recorded",),
        "info",
        "ENDIT removals recorded",
    ),
    LogEvent(
        ("endit.remove_invalid", "endit.remove_locate_failed", "endit.unknown_action"),
        "warning",
        "a bad ENDIT request file",
        "check the pool plugin",
    ),
    LogEvent(
        ("endit.pass_failed",),
        "error",
        "an ENDIT pass hit an error (traceback logged)",
        "persistent: report with the log",
    ),
)

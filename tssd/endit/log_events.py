"""The log events of the ENDIT directories (declared as tssd/log_events.py says)."""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("endit.orphan_removed",),
        "info",
        (
            "a file in ENDIT `in/` whose request file stayed away for `endit.orphan_grace_s` was "
            "removed"
        ),
    ),
    LogEvent(
        ("endit.orphan_remove_failed",),
        "warning",
        "such a file could not be removed (the next pass tries again)",
        "check `in/`'s permissions",
    ),
    LogEvent(
        ("endit.root_opened",),
        "info",
        (
            "at start, an ENDIT base directory was opened; `resolved` is the directory tssd "
            "serves until it stops, whatever the configured path later points to"
        ),
    ),
    LogEvent(
        ("endit.dir_refused",),
        "error",
        (
            "`in/`, `out/`, `request/` or `trash/` of an ENDIT directory is a symlink or not a "
            "directory: tssd does not follow it, and nothing in it is read, written or removed "
            "until it is a directory again (logged once until then; "
            "`tssd_endit_dirs_refused_total`)"
        ),
        "replace it by a real directory; find out who put the symlink there",
    ),
    LogEvent(
        ("endit.not_a_file",),
        "warning",
        (
            "an entry of an ENDIT subdirectory with a pnfsid name is not a regular file (a "
            "directory, symlink, FIFO): ignored (logged once per name)"
        ),
        "remove it",
    ),
    LogEvent(
        ("endit.stage_dropped",),
        "warning",
        (
            "a stage request's `parent_pid` (the pool process that wrote it) no longer runs: its "
            "request file was deleted, as ENDIT's retriever does, and a running recall for it is "
            "cancelled after `endit.cancel_grace_s` (`tssd_endit_stages_dropped_total`)"
        ),
        (
            "none if the pool was stopped; tssd in another PID namespace than the pool: set "
            "`endit.check_parent_pid = false`"
        ),
    ),
    LogEvent(
        ("endit.instance_mismatch",),
        "warning",
        (
            "a trash file's URI names another HSM instance than the directory's `hsm_name`: "
            "dCache only hands a file to the instance its URI names, so `hsm_name` is not the "
            "pool's instance name (the removal is recorded all the same)"
        ),
        "set `hsm_name` to the name in the pool's `hsm create` line",
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

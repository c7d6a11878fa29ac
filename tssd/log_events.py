"""The log events of the daemon, its API, requests, scheduler and background jobs.

Declared once here; docs/reference/log-events.md is generated from the declarations
(``python -m tssd.reference docs/reference``) and tests/unit/test_reference_docs.py fails
when an event the code logs (a ``log.<level>("name", ...)`` call) is declared nowhere.
Links in ``action`` point at sections of docs/operations.md.
"""

from __future__ import annotations

from typing import NamedTuple


class LogEvent(NamedTuple):
    """One line of the reference: events that share a meaning are declared together."""

    names: tuple[str, ...]
    level: str
    meaning: str
    action: str = ""


EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("config.effective",),
        "info",
        "every setting at start-up, and which were overridden",
    ),
    LogEvent(
        ("db.initialized", "db.ready"),
        "info",
        "schema created on an empty database / checked",
    ),
    LogEvent(
        ("db.retry",),
        "warning",
        "a database operation failed and is retried",
        "persistent: [database](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("db.analyzed",),
        "info",
        (
            "tssd ran `ANALYZE` of a table it changed itself (`table`, `rows_changed`, `rows`, "
            "`duration_s`; `database.analyze_rows`)"
        ),
    ),
    LogEvent(
        ("db.analyze_failed",),
        "warning",
        "that `ANALYZE` failed; the next batch of changes tries again",
        "persistent: [database](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("daemon.ready",),
        "info",
        "listening (`listen` lists the addresses)",
    ),
    LogEvent(
        ("daemon.runs_as_root",),
        "warning",
        "tssd runs as root; `tssctl status` shows it too",
        'run it as the pool\'s user (docs/dcache.md, "Who owns the files")',
    ),
    LogEvent(
        ("daemon.simulated_backend",),
        "warning",
        (
            "`backend.type` is `sim` with a home that is no demo's (neither the per-user default "
            'nor below the temporary directory): the "tape" copies are files on this host; '
            "`tssctl status` shows it too"
        ),
        'production: `backend.type = "sp"` or `"scsi"` (docs/backends.md)',
    ),
    LogEvent(
        ("remove.by_pnfsid",),
        "info",
        "a removal named an endit URI (`bfid=<pnfsid>`): every copy of the file removed",
    ),
    LogEvent(
        ("daemon.stopping", "daemon.stopped"),
        "info",
        "shutdown begun / done",
    ),
    LogEvent(
        ("daemon.refused",),
        "error",
        "bad configuration or schema revision: the message names the fix",
        "fix and restart",
    ),
    LogEvent(
        ("daemon.failed",),
        "error",
        "the daemon stopped on an error",
        "[tssd down](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("api.error",),
        "error",
        "an API call failed inside tssd (HTTP 500)",
        "report with the log",
    ),
    LogEvent(
        ("api.database_unavailable",),
        "warning",
        "an API call met the database away (HTTP 503; clients retry)",
        "persistent: [database](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("api.unauthorized",),
        "warning",
        "a TCP API call without the right bearer token",
        "check the client's `TSSD_TOKEN_FILE`",
    ),
    LogEvent(
        ("api.pool_roots",),
        "info",
        (
            "the pool roots in force at start (`api.pool_roots` or `$TSSD_HOME/pools`, plus "
            "`--pool-root`)"
        ),
        "check they are the pools' directories (docs/reliability.md)",
    ),
    LogEvent(
        ("pool.root_resolved",),
        "info",
        (
            "a pool root (or ENDIT directory) resolved and held open at start: `root` as "
            "configured, `resolved` where it leads (`symlink` true when they differ); files below"
            " it are reached from there until tssd restarts"
        ),
        "check `resolved` is the pool's directory; restart tssd after moving a root",
    ),
    LogEvent(
        ("pool.root_unavailable",),
        "warning",
        "a root could not be opened at start; it is resolved at its first use",
        "create the directory or fix `api.pool_roots`",
    ),
    LogEvent(
        ("api.pool_root_missing",),
        "warning",
        "a configured pool root is not a directory: every request below it fails",
        "fix `api.pool_roots` / `--pool-root`",
    ),
    LogEvent(
        ("api.forbidden",),
        "warning",
        "a call the caller's role may not make (`role`, `reason`)",
        "run it as the daemon's user or with the admin token",
    ),
    LogEvent(
        ("api.bad_input",),
        "warning",
        "input tssd cannot represent (a surrogate, a non-UTF-8 byte), answered 400",
        "the client sends bad data",
    ),
    LogEvent(
        ("api.connection_caps",),
        "info",
        "at start: descriptor limit and the connection cap of each listener",
        "raise `LimitNOFILE` if the TCP cap is lower than wanted",
    ),
    LogEvent(
        ("api.connection_refused",),
        "warning",
        (
            "a listener is at its cap; connections answered 503 (`refused` since the last line, "
            "at most one line per 10 s)"
        ),
        "slow or idle clients, or a cap too low (`limits.max_connections_*`)",
    ),
    LogEvent(
        ("admission.refused",),
        "warning",
        (
            "submits answered 503 (`reason`: open requests or event-loop lag; at most one line "
            "per 10 s)"
        ),
        "the backlog drains; raise `limits.max_open_requests` only with the memory for it",
    ),
    LogEvent(
        ("loop.stall",),
        "warning",
        (
            "the event loop ran late by `lag_s` (its own CPU in the window: `cpu_s`; all of "
            "tssd's threads: `process_cpu_s`)"
        ),
        (
            "`cpu_s` near `lag_s`: tssd's own work on the loop; `process_cpu_s` near `lag_s`: its"
            " worker threads held the interpreter; both far below: the machine is overloaded"
        ),
    ),
    LogEvent(
        ("admission.count_failed",),
        "warning",
        (
            "the periodic count of open requests failed (database away); the last count stays in "
            "force until the next one"
        ),
        "persistent: [database](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("api.nofile_not_raised",),
        "warning",
        "at start the descriptor limit could not be raised to its hard limit (`soft`, `hard`)",
        "raise `LimitNOFILE` in the unit",
    ),
    LogEvent(
        ("admission.summary",),
        "info",
        "at stop: the largest loop lag, submits refused",
    ),
    LogEvent(
        ("catalog.imported",),
        "info",
        "a catalog import (path, replace, force, rows, uid)",
    ),
    LogEvent(
        ("api.path_refused",),
        "warning",
        "a request named a path outside the pool roots",
        "check the pool configuration",
    ),
    LogEvent(
        ("request.submitted", "request.bulk_submitted"),
        "info",
        "intake",
    ),
    LogEvent(
        ("request.attach_refused",),
        "warning",
        (
            "a migration named the pnfsid of an open migration of another file (`size`, "
            "`checksum` against `open_size`, `open_checksum`): refused, dCache flushes it again "
            "later"
        ),
        "several pools holding different bytes under one pnfsid: check the namespace entry",
    ),
    LogEvent(
        ("request.done", "request.failed"),
        "info / warning",
        "a request finished (`error_code` = tss-hsm exit code)",
        "look at `error` for failures",
    ),
    LogEvent(
        ("request.cancelled", "request.retried"),
        "info",
        "operator actions",
    ),
    LogEvent(
        ("requests.requeued",),
        "info",
        "requests left active by a crash went back to the queue",
    ),
    LogEvent(
        ("recall.geometry.unknown",),
        "warning",
        (
            "the backend could not tell a mounted tape's geometry (transient error); its reads go"
            " in position order this mount"
        ),
        "none; asked again at the next mount",
    ),
    LogEvent(
        ("recall.retracted",),
        "info",
        "a recall cancelled while on tape took back its delivered file",
    ),
    LogEvent(
        ("delivery.abandoned",),
        "warning",
        (
            "no tss-hsm call claimed a recall's part file within `delivery.claim_timeout_s` "
            "(dCache gave up); the part file was removed"
        ),
        (
            "many: `rh set timeout` shorter than the tape queue, or `claim_timeout_s` shorter "
            "than `p:delay` (docs/dcache.md)"
        ),
    ),
    LogEvent(
        ("delivery.sweep_failed",),
        "warning",
        "a pass of the unclaimed-part-file reaper met a database error; the next pass retries",
        "persistent: [database](#tssd-down-or-database-unreachable)",
    ),
    LogEvent(
        ("delivery.unlink_failed",),
        "warning",
        "an unclaimed part file could not be removed",
        "check the pool directory's permissions",
    ),
    LogEvent(
        ("remove.absent",),
        "info",
        "a removal found the object already gone",
    ),
    LogEvent(
        ("queue.changed",),
        "info",
        "`tssctl queues set` changed a queue",
    ),
    LogEvent(
        ("queue.seeded",),
        "info",
        (
            "at start, a `[[queues]]` table of the configuration created a queue or set the keys "
            "it gives"
        ),
    ),
    LogEvent(
        ("drive.operator_disable", "drive.operator_enable"),
        "info",
        "`tssctl drives disable/enable`",
    ),
    LogEvent(
        ("drive.disabled",),
        "error",
        "tssd took a drive out of service after repeated failures",
        "[a drive fails](#a-drive-fails)",
    ),
    LogEvent(
        ("tape.suspect",),
        "error",
        "a tape failed on several drives",
        "[a tape is stuck](#a-tape-is-stuck)",
    ),
    LogEvent(
        ("dismount.failed",),
        "warning",
        "a dismount failed",
        "check the drive; [a drive fails](#a-drive-fails)",
    ),
    LogEvent(
        ("session.start", "session.end"),
        "info",
        "a drive started/finished serving a tape or storage class",
    ),
    LogEvent(
        ("session.failed",),
        "warning",
        "a tape session broke; its requests went back to the queue",
        "check the drive and the backend",
    ),
    LogEvent(
        ("session.crashed",),
        "error",
        "a session hit a bug (traceback logged)",
        "report with the log",
    ),
    LogEvent(
        ("session.preempt",),
        "info",
        "a lower-priority session yields its drive to waiting higher-priority work",
    ),
    LogEvent(
        ("balance.pre_read",),
        "debug",
        (
            "near the end of bulk work, with a latency target configured: a freeing drive first "
            "reads `seconds` of `volume`, which a drive freeing later would otherwise end late "
            '(docs/scheduling.md, "Ending the drives together")'
        ),
    ),
    LogEvent(
        ("mount.start", "mount.ready", "mount.end"),
        "info",
        "a mount, with `mount_s`, and at dismount `files`, `bytes`, `session_s`, `efficiency`",
    ),
    LogEvent(
        ("planner.loaded", "planner.resynced"),
        "info / debug",
        "the scheduler loaded / re-read the pending recalls",
    ),
    LogEvent(
        ("planner.resync_failed",),
        "warning",
        (
            "the periodic re-read of the pending recalls (in the background) failed; the next "
            "full pass retries"
        ),
        "persistent: check the database",
    ),
    LogEvent(
        ("scheduler.pass_failed",),
        "warning",
        "a scheduling pass hit an error and will retry",
        "persistent: check the database",
    ),
    LogEvent(
        ("scheduler.pass_crashed",),
        "error",
        "a scheduling pass hit a bug (traceback logged)",
        "report with the log",
    ),
    LogEvent(
        ("scheduler.decision_slow",),
        "warning",
        (
            "a freed drive waited more than 50 ms for its next mount decision: `seconds`, "
            "`before_pass_ms` (the pass running when it freed up, the loop's other work; "
            "negative: it freed up during the pass that decided it), `pass_ms`, `cpu_ms` (the "
            "loop thread's CPU during the pass: far below `pass_ms` when the process waited for a"
            " core), the pass's steps (`queues_ms`, `removals_ms`, `migrations_ms`, `locate_ms`, "
            "`refresh_ms`, `rank_ms`, `assign_ms`, `dismount_ms`, `pending_ms`), `full`, `scored`"
            " (tapes the ranking scored again)"
        ),
        "often: look at the slowest step; `locate_ms`/`refresh_ms`: the database",
    ),
    LogEvent(
        ("scheduler.draining", "scheduler.cancelled_sessions"),
        "info / warning",
        "shutdown: sessions finishing / cancelled after the grace time",
    ),
    LogEvent(
        ("scheduler.left_mounted",),
        "warning",
        (
            "shutdown: tapes still in their drives when `scheduler.shutdown_unload_s` passed "
            "(`drives`: drive -> volume)"
        ),
        "none: the next start finds them there (see Shutdown)",
    ),
    LogEvent(
        ("backend.retry", "backend.gave_up"),
        "info / warning",
        "a transient backend error is retried / gave up after `backend.retries`",
        "persistent: [backend errors](#backend-errors)",
    ),
    LogEvent(
        ("request.gave_up",),
        "warning",
        (
            "a request's tape session failed the same way `backend.max_same_failures` times in a "
            "row; the request fails with that error"
        ),
        "[impossible work](#work-that-can-never-succeed)",
    ),
    LogEvent(
        ("backend.requeue_failed",),
        "error",
        "requests of a failed operation could not be queued again",
        "check the database",
    ),
    LogEvent(
        ("backpressure.hold", "backpressure.release"),
        "warning / info",
        "recalls wait for free space on a pool file system / go on",
        "free space on the pool",
    ),
    LogEvent(
        ("metrics.refresh_failed",),
        "warning",
        "the database gauges could not be read",
        "check the database",
    ),
    LogEvent(
        ("status.depth_sample_failed",),
        "warning",
        "a queue-depth sample of the /status page could not be read (a gap in its chart)",
        "check the database",
    ),
    LogEvent(
        ("files.abort_failed", "files.retract_failed", "files.dir_fsync_failed"),
        "warning",
        "a temporary or retracted file could not be removed / a directory not synced",
        "check the pool file system",
    ),
    LogEvent(
        ("retention.deleted",),
        "info",
        "finished requests older than `database.retention_days` deleted with their events",
    ),
    LogEvent(
        ("retention.failed",),
        "warning",
        "a retention round failed; the next round (`database.retention_every_s`) tries again",
        "persistent: check the database",
    ),
    LogEvent(
        ("background.died",),
        "error",
        (
            "a periodic job (`task`: `retention`, `metrics-db`, `delivery-reaper`, "
            "`depth-sampler`) ended by an error it does not retry (`error`); it stays stopped "
            "until tssd restarts"
        ),
        "restart tssd, and report the error: every job retries its expected errors itself",
    ),
)

"""Prometheus metrics (listed in docs/operations.md), one registry per daemon: no global state.

No label may take one value per tape or per file: per-tape figures live in the database
(``tapes.mounts``, ``mounts`` history), not in label sets.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tssd.domain import State

CONTENT_TYPE = CONTENT_TYPE_LATEST

_SECONDS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
_MOUNT_SECONDS = (5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600)
_SESSION_SECONDS = (10, 60, 300, 600, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 24 * 3600)
_FILES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
_BYTES = tuple(float(10**k) for k in range(6, 14))
_RATIO = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
_LOCATE = (0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120)
_DECISION = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """Every metric tssd exports, registered in a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests_total = Counter(
            "tssd_requests",
            "Requests finished, by kind, queue and outcome (done, failed, cancelled).",
            ["kind", "queue", "outcome"],
            registry=r,
        )
        self.requests_pending = Gauge(
            "tssd_requests_pending", "Requests queued or active now.", ["kind", "queue"], registry=r
        )
        self.request_duration = Histogram(
            "tssd_request_duration_seconds",
            "Seconds from submission to the end of a request.",
            ["kind", "queue"],
            buckets=_SECONDS,
            registry=r,
        )
        self.mounts_total = Counter(
            "tssd_mounts", "Tape mounts started (robot exchange and load).", registry=r
        )
        self.mount_seconds = Histogram(
            "tssd_mount_seconds",
            "Seconds per mount from the mount request until the tape is ready (robot + load).",
            buckets=_MOUNT_SECONDS,
            registry=r,
        )
        self.mount_session_seconds = Histogram(
            "tssd_mount_session_seconds",
            "Seconds per mount from the mount request to the end of the dismount.",
            buckets=_SESSION_SECONDS,
            registry=r,
        )
        self.mount_files = Histogram(
            "tssd_mount_files",
            "Files read or written per mount, observed at dismount.",
            buckets=_FILES,
            registry=r,
        )
        self.mount_bytes = Histogram(
            "tssd_mount_bytes",
            "Bytes read or written per mount, observed at dismount.",
            buckets=_BYTES,
            registry=r,
        )
        self.mount_efficiency = Histogram(
            "tssd_mount_efficiency",
            "Per mount, 0..1: seconds transferring divided by seconds the tape was held.",
            buckets=_RATIO,
            registry=r,
        )
        self.locate_seconds = Histogram(
            "tssd_locate_seconds",
            "Seconds positioning the tape before a file.",
            buckets=_LOCATE,
            registry=r,
        )
        # Scale (issue 22): what a million pending requests cost the scheduler and store.
        self.schedule_decision_seconds = Histogram(
            "tssd_schedule_decision_seconds",
            "Seconds from a drive freeing up to the end of the scheduling pass that decided "
            "its next mount (or that there is none).",
            buckets=_DECISION,
            registry=r,
        )
        self.db_analyze_total = Counter(
            "tssd_db_analyze",
            "ANALYZE runs tssd started itself on a table it changed (database.analyze_rows).",
            ["table"],
            registry=r,
        )
        self.retention_deleted_total = Counter(
            "tssd_retention_deleted",
            "Finished requests deleted with their events by retention (database.retention_days).",
            registry=r,
        )
        self.transfer_bytes_total = Counter(
            "tssd_transfer_bytes",
            "Bytes moved between tape and disk, by kind (recall, migrate).",
            ["kind"],
            registry=r,
        )
        self.backend_errors_total = Counter(
            "tssd_backend_errors",
            "Backend operation errors, transient (retried) or not.",
            ["transient"],
            registry=r,
        )
        self.backend_retries_total = Counter(
            "tssd_backend_retries",
            "Backend operations retried after a transient error.",
            registry=r,
        )
        # Reliability (tssd/health.py, tssd/backpressure.py).
        self.hardware_failures_total = Counter(
            "tssd_hardware_failures",
            "Failed drive or tape operations counted against the hardware, by operation.",
            ["op"],
            registry=r,
        )
        self.drives_disabled_total = Counter(
            "tssd_drives_disabled",
            "Drives taken out of service after failing repeatedly.",
            registry=r,
        )
        self.tapes_suspect_total = Counter(
            "tssd_tapes_suspect",
            "Tapes marked suspect after failing on several drives.",
            registry=r,
        )
        self.attach_refused_total = Counter(
            "tssd_attach_refused",
            "Migrations not attached to the open migration of their pnfsid because size or "
            "adler32 differ (another pool's file): answered 409, tss-hsm exit 1.",
            registry=r,
        )
        self.recalls_abandoned_total = Counter(
            "tssd_recalls_abandoned",
            "Recalls whose part file no pool call claimed within delivery.claim_timeout_s "
            "(dCache gave up): the part file was removed.",
            registry=r,
        )
        self.recalls_held = Gauge(
            "tssd_recalls_held",
            "File systems whose recalls wait for free space (disk backpressure).",
            registry=r,
        )
        self.drives = Gauge(
            "tssd_drives",
            "Drives by state (empty, mounted, busy, disabled).",
            ["state"],
            registry=r,
        )
        # Refreshed from the database by tssd.metrics_db (the operators' alerts use them).
        self.queue_paused = Gauge(
            "tssd_queue_paused", "1 if the queue is paused by an operator, else 0.", ["queue"],
            registry=r,
        )  # fmt: skip
        self.queue_oldest_seconds = Gauge(
            "tssd_queue_oldest_queued_seconds",
            "Age of the oldest queued request of the queue (0 when none is queued).",
            ["queue"],
            registry=r,
        )
        self.tapes_mounted_24h = Gauge(
            "tssd_tapes_mounted_24h", "Distinct tapes mounted in the last 24 hours.", registry=r
        )
        self.tapes_over_budget = Gauge(
            "tssd_tapes_over_mount_budget",
            "Tapes mounted more often in the last 24 hours than scheduler.mount_budget_per_day.",
            registry=r,
        )
        self.tape_mounts_24h_max = Gauge(
            "tssd_tape_mounts_24h_max",
            "Most mounts of any one tape in the last 24 hours (tssctl tapes list names it).",
            registry=r,
        )
        self.endit = EnditMetrics(r)

    def ended(self, state: State, labels: Sequence[tuple[str, str]]) -> None:
        """Requests of these (kind, queue) ended in *state* (``db.notifier.Outcomes``):
        the store calls it on every change to done, failed or cancelled."""
        for kind, queue in labels:
            self.requests_total.labels(kind, queue, state.value).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class EnditMetrics:
    """The ENDIT intake (tssd/endit/), by configured base directory (one per pool)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.requests_seen = Counter(
            "tssd_endit_requests_seen",
            "ENDIT files taken up as new tssd requests, by action (recall, migrate, remove).",
            ["directory", "action"],
            registry=r,
        )
        self.stages_delivered = Counter(
            "tssd_endit_stages_delivered",
            "Recalled files delivered into in/ with the requested size.",
            ["directory"],
            registry=r,
        )
        self.flushes_acknowledged = Counter(
            "tssd_endit_flushes_acknowledged",
            "Flushes acknowledged to the plugin (out/<id> unlinked once the file is on tape).",
            ["directory"],
            registry=r,
        )
        self.errors_written = Counter(
            "tssd_endit_errors_written",
            "Failed stages reported through request/<id>.err, by the code written.",
            ["directory", "code"],
            registry=r,
        )
        self.stages_paused = Gauge(
            "tssd_endit_stages_paused",
            "Stages waiting for free space in in/ (endit.min_free_percent, min_free_bytes).",
            ["directory"],
            registry=r,
        )
        self.stages_dropped = Counter(
            "tssd_endit_stages_dropped",
            "Stage requests dropped (request file deleted) because their pool process died.",
            ["directory"],
            registry=r,
        )
        self.dirs_refused = Counter(
            "tssd_endit_dirs_refused",
            "Times a subdirectory (in/, out/, request/, trash/) was found to be a symlink or "
            "not a directory and refused (counted once until it is a directory again).",
            ["directory", "subdir"],
            registry=r,
        )

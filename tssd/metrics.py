"""Prometheus metrics (contracts section 5), one registry per daemon: no global state.

No label may take one value per tape or per file: per-tape figures live in the database
(``tapes.mounts``, ``mounts`` history), not in label sets.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST

_SECONDS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
_MOUNT_SECONDS = (5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600)
_SESSION_SECONDS = (10, 60, 300, 600, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 24 * 3600)
_FILES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
_BYTES = tuple(float(10**k) for k in range(6, 14))
_RATIO = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
_LOCATE = (0.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120)


class Metrics:
    """Every metric tssd exports, registered in a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests_total = Counter(
            "tssd_requests",
            "Requests finished, by outcome.",
            ["kind", "queue", "outcome"],
            registry=r,
        )
        self.requests_pending = Gauge(
            "tssd_requests_pending", "Requests queued or active.", ["kind", "queue"], registry=r
        )
        self.request_duration = Histogram(
            "tssd_request_duration_seconds",
            "Time from submission to completion.",
            ["kind", "queue"],
            buckets=_SECONDS,
            registry=r,
        )
        self.mounts_total = Counter("tssd_mounts", "Tape mounts performed.", registry=r)
        self.mount_seconds = Histogram(
            "tssd_mount_seconds",
            "Robot exchange plus load until the tape is ready.",
            buckets=_MOUNT_SECONDS,
            registry=r,
        )
        self.mount_session_seconds = Histogram(
            "tssd_mount_session_seconds",
            "Time from mount to dismount.",
            buckets=_SESSION_SECONDS,
            registry=r,
        )
        self.mount_files = Histogram(
            "tssd_mount_files", "Files transferred per mount.", buckets=_FILES, registry=r
        )
        self.mount_bytes = Histogram(
            "tssd_mount_bytes", "Bytes transferred per mount.", buckets=_BYTES, registry=r
        )
        self.mount_efficiency = Histogram(
            "tssd_mount_efficiency",
            "Per mount: time transferring divided by time the tape was held mounted.",
            buckets=_RATIO,
            registry=r,
        )
        self.locate_seconds = Histogram(
            "tssd_locate_seconds",
            "Time positioning the tape before a file.",
            buckets=_LOCATE,
            registry=r,
        )
        self.transfer_bytes_total = Counter(
            "tssd_transfer_bytes", "Bytes moved between tape and disk.", ["kind"], registry=r
        )
        self.backend_errors_total = Counter(
            "tssd_backend_errors", "Backend operation errors.", ["transient"], registry=r
        )
        self.backend_retries_total = Counter(
            "tssd_backend_retries",
            "Backend operations retried after a transient error.",
            registry=r,
        )
        self.drives = Gauge("tssd_drives", "Drives by state.", ["state"], registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

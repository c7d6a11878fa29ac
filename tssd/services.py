"""The daemon's components, wired together once per process (no global singletons)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tssd.backends.base import TapeBackend
from tssd.clock import utcnow
from tssd.cluster.node import Node
from tssd.config import Settings
from tssd.db.interface import RequestStoreInterface
from tssd.metrics import Metrics
from tssd.ports.history import RequestHistory, Retention
from tssd.ports.reports import Admin, Efficiency, Gauges, Glance
from tssd.ports.upkeep import Upkeep
from tssd.safepath import HeldRoots
from tssd.scheduler.core import Scheduler
from tssd.scheduler.drives import DriveManager

VERSION = "0.1.0"


@dataclass
class Services:
    settings: Settings
    store: RequestStoreInterface
    backend: TapeBackend
    metrics: Metrics
    drives: DriveManager
    scheduler: Scheduler
    database: str
    #: Reads of requests and their events (ENDIT, the delivery reaper, simulate).
    history: RequestHistory
    #: The purge of old finished requests (the retention loop).
    retention: Retention
    #: The operator's reads and settings (tssd.ports.reports): GET /v1/top and /status,
    #: the admin routes, the efficiency report, the database gauges.
    glance: Glance
    admin: Admin
    reports: Efficiency
    gauges: Gauges
    #: The database's table statistics, told what the retention purge deleted.
    upkeep: Upkeep
    accepting: bool = True
    #: The instances sharing the database (tssd.cluster); None in bare test wiring.
    cluster: Node | None = None
    #: The pool roots held open since start (tssd.safepath); None when nothing is on disk.
    pool_roots: HeldRoots | None = None
    #: Operator warnings shown by ``tssctl status`` (e.g. tssd runs as root).
    warnings: list[str] = field(default_factory=list)
    started_at: datetime = field(default_factory=utcnow)
    _started_mono: float = field(default_factory=time.monotonic)

    def stop_accepting(self) -> None:
        """Shutting down: submissions are answered 503 from now on."""
        self.accepting = False

    async def status(self) -> dict[str, Any]:
        counts: dict[str, dict[str, int]] = {}
        queues: dict[str, dict[str, int]] = {}
        for kind, queue, state, n in await self.store.counts():
            per_kind = counts.setdefault(kind, {})
            per_kind[state] = per_kind.get(state, 0) + n
            per_queue = queues.setdefault(queue, {"queued": 0, "active": 0})
            if state in per_queue:
                per_queue[state] += n
        for per_kind in counts.values():
            for state in ("queued", "active", "done", "failed", "cancelled", "abandoned"):
                per_kind.setdefault(state, 0)
        queue_rows = await self.store.queues()
        names = sorted(set(queues) | {q["name"] for q in queue_rows})
        by_name = {q["name"]: q for q in queue_rows}
        return {
            "version": VERSION,
            "started_at": self.started_at.isoformat(),
            "uptime_s": round(time.monotonic() - self._started_mono, 3),
            "backend": self.backend.name,
            "database": self.database,
            "accepting": self.accepting,
            "warnings": list(self.warnings),
            "counts": counts,
            "queues": [
                {
                    "name": n,
                    "priority": by_name.get(n, {}).get("priority", 0),
                    "max_drives": by_name.get(n, {}).get("max_drives"),
                    "paused": by_name.get(n, {}).get("paused", False),
                    "latency_target_s": by_name.get(n, {}).get("latency_target_s"),
                    **queues.get(n, {"queued": 0, "active": 0}),
                }
                for n in names
            ],
            "drives": [
                {"name": d.name, "enabled": d.enabled, "state": d.state, "volume": d.volume}
                for d in sorted(self.drives.drives.values(), key=lambda d: d.name)
            ],
            "throughput": self.drives.throughput(),
            "instance": self.cluster.instance if self.cluster else None,
            "instances": await self.cluster.status() if self.cluster else [],
        }

"""The operator's reads and settings: the library at a glance, the admin views, the
efficiency report and the database gauges.

Four narrow ports, each handed only to the components that use it (``tssd/app.py`` puts
them on :class:`tssd.services.Services`):

- :class:`Glance`: the bounded reads of ``GET /v1/top`` and the ``/status`` page;
- :class:`Admin`: queues, drives, tapes and mount history (``tssctl``, the /v1 admin
  routes) and the seeding of the ``[[queues]]`` tables at start;
- :class:`Efficiency`: the mount-efficiency report (``tssctl report efficiency``);
- :class:`Gauges`: the figures behind the database gauges (:mod:`tssd.metrics_db`).

``tssd/db/`` implements them in SQL (``GlanceStore``, ``AdminStore``, ``ReportStore``,
``GaugeStore``) and in memory (:mod:`tssd.db.memory_reports`);
``tests/integration/test_reports_contract.py`` runs one suite on SQLite, PostgreSQL and
memory. Times are UTC-aware datetimes. The JSON-shaped answers (``dict``) are the ones the
HTTP API returns (docs/api.md); the helpers below shape a mount the one way all of them do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tssd import domain
from tssd.config.queues import QueueSettings

#: A keyword left out of :meth:`Admin.set_queue`, as opposed to None (= "no limit").
UNSET: Any = object()


@dataclass(frozen=True)
class MountFilter:
    """Which mounts :meth:`Admin.mounts` lists."""

    #: Mounts requested since, or still open at, this time.
    since: datetime | None = None
    #: Mounts requested before this time.
    until: datetime | None = None
    drive: str | None = None
    volume: str | None = None
    limit: int = 1000
    #: Only mounts whose id is greater (the ``next`` of the previous page).
    after: int | None = None
    #: Only the newest *limit* matches (still returned oldest first).
    newest: bool = False


class Glance(Protocol):
    """The library at a glance; every read is bounded (by the number of drives, or a
    row limit), so that a view refreshed every second or two costs little however long
    the history."""

    async def drives(self) -> list[domain.Drive]:
        """Every drive of every instance sharing the database, by name."""
        ...

    async def open_mounts(self) -> dict[str, domain.Mount]:
        """The mount each drive holds now, by drive, among the newest thousand mounts."""
        ...

    async def active_per_drive(self) -> dict[str, tuple[int, int]]:
        """Requests claimed by each drive and not finished yet: (count, bytes)."""
        ...

    async def last_mounts(self, limit: int) -> list[domain.Mount]:
        """The newest *limit* mounts, newest first."""
        ...

    async def mounts_since(self, since: datetime, limit: int) -> tuple[list[domain.Mount], bool]:
        """Mounts requested since *since* or still open, oldest first, at most *limit*
        (the newest); and whether older ones were left out."""
        ...


class Admin(Protocol):
    """Queues, drives, tapes and mounts as operators see them (the durable state; the
    caller merges in the live drive view of its own daemon)."""

    async def queues(self, always: str | None = None) -> list[dict[str, Any]]:
        """Configured queues, queues with open requests and *always*, by name, with their
        load: queued, active (and their bytes), the oldest queued request's time."""
        ...

    async def set_queue(
        self,
        name: str,
        *,
        priority: int | None = None,
        max_drives: Any = UNSET,
        paused: bool | None = None,
        latency_target_s: Any = UNSET,
    ) -> dict[str, Any]:
        """Create or change queue *name*; only the given fields change (None for
        *priority* and *paused*, :data:`UNSET` for the others: left as they are).
        Returns the queue as :meth:`queues` lists it."""
        ...

    async def seed_queues(self, queues: Sequence[QueueSettings]) -> None:
        """Apply the ``[[queues]]`` tables at start: create the missing queues, set the
        keys each table gives (a key left out keeps its run-time value)."""
        ...

    async def drives(self) -> list[dict[str, Any]]:
        """Every drive by name: enabled, state (``disabled`` when not enabled), volume,
        updated_at, mounts of the last 24 hours and the last mount's time."""
        ...

    async def set_drive_enabled(self, name: str, enabled: bool) -> None:
        """Enable or disable drive *name*; :class:`tssd.errors.NotFound` if unknown."""
        ...

    async def tapes(
        self,
        limit: int,
        after: str | None = None,
        queued: Mapping[str, tuple[int, int]] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Tapes known to tssd (mounted once or with open recalls), by volume, *limit*
        after *after*; and the volume to continue after, if more follow.

        *queued*: (count, bytes) of the queued recalls per volume as the caller already
        knows them; then only the active recalls are counted here.
        """
        ...

    async def tape(self, volume: str, history: int = 20) -> dict[str, Any]:
        """One tape: its counters, requests by state, the drive holding it, its last
        *history* mounts (oldest first); :class:`tssd.errors.NotFound` if tssd never
        mounted it and has no request for it."""
        ...

    async def mounts(self, flt: MountFilter) -> tuple[list[dict[str, Any]], int | None]:
        """Mount history in id (= time) order (:func:`mount_json` each); the id to
        continue after, if more match."""
        ...


class Efficiency(Protocol):
    """The mount-efficiency report from the durable history."""

    async def efficiency(self, since: datetime, until: datetime, bins: int = 0) -> dict[str, Any]:
        """The report of the mounts requested in [since, until): totals, per drive, per
        tape and per queue; with *bins*, a timeline of that many bins (at most 1000)."""
        ...


class Gauges(Protocol):
    """The figures behind the database gauges, refreshed in the background."""

    async def pauses_and_mounts(self, since: datetime) -> tuple[dict[str, bool], list[int]]:
        """Each configured queue's pause flag, and the mounts of each tape requested since
        *since* (one count per tape, in no order)."""
        ...

    async def oldest_queued(self) -> dict[str, datetime]:
        """The creation time of each queue's oldest queued request (queues with none are
        absent); figures of bounded cost, possibly some seconds old on a large table."""
        ...


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def seconds(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from *start* to *end*, never negative; None if either is unknown."""
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def mount_json(row: domain.Mount) -> dict[str, Any]:
    """A mount with its derived figures; efficiency as the metric defines it.

    ``session_s`` runs from the mount request to the end of the dismount, like the
    ``tssd_mount_session_seconds`` observation, so the two agree.
    """
    session_s = seconds(row.requested_at, row.dismounted_at)
    efficiency = None
    if session_s is not None:
        efficiency = min(1.0, row.transfer_s / session_s) if session_s > 0 else 0.0
    return {
        "id": row.id,
        "drive": row.drive,
        "volume": row.volume,
        "purpose": row.purpose,
        "requested_at": iso(row.requested_at),
        "ready_at": iso(row.ready_at),
        "dismounted_at": iso(row.dismounted_at),
        "open": row.dismounted_at is None,
        "mount_s": seconds(row.requested_at, row.ready_at),
        "session_s": session_s,
        "files": row.files,
        "bytes": row.bytes,
        "transfer_s": round(row.transfer_s, 6),
        "efficiency": efficiency,
    }


def wear(mounts: Sequence[domain.Mount], since: datetime, limit: int) -> list[tuple[str, int]]:
    """The tapes mounted most often since *since*: (volume, mounts), most first."""
    counts = Counter(m.volume for m in mounts if m.requested_at >= since)
    return sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:limit]

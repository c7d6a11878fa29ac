"""The mount-efficiency report (``tssctl report efficiency``) from the durable history.

A window of mounts is summarised overall, per drive, per tape and per queue:
mounts, files and bytes per mount, mount efficiency (time transferring / time a tape was
held, summed over the mounts so long mounts weigh more), mount time and remounts. A
*remount* is a mount of a tape already mounted earlier in the window; remounts per day
scale that count to the window's length.

A queue's share of a mount is the requests of that queue which finished on that drive
and tape while it was mounted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd import domain
from tssd.db.models import Mount, Request
from tssd.db.views import mount_record
from tssd.ports.reports import iso, mount_json

#: Most tapes listed per report (the worst first); the totals cover all of them.
TAPES_LISTED = 50
MAX_BINS = 1000


@dataclass
class Tally:
    """Running sums of a group of mounts."""

    mounts: int = 0
    closed: int = 0
    remounts: int = 0
    files: int = 0
    bytes: int = 0
    transfer_s: float = 0.0
    session_s: float = 0.0
    mount_s: list[float] | None = None

    def add(self, mount: dict[str, Any], remount: bool, files: int, nbytes: int) -> None:
        self.mounts += 1
        self.remounts += remount
        self.files += files
        self.bytes += nbytes
        if self.mount_s is None:
            self.mount_s = []
        if mount["mount_s"] is not None:
            self.mount_s.append(mount["mount_s"])
        if mount["session_s"] is not None:
            self.closed += 1
            self.transfer_s += mount["transfer_s"]
            self.session_s += mount["session_s"]

    def summary(self, days: float) -> dict[str, Any]:
        per = max(self.mounts, 1)
        times = self.mount_s or []
        return {
            "mounts": self.mounts,
            "remounts": self.remounts,
            "remounts_per_day": round(self.remounts / days, 3),
            "files": self.files,
            "bytes": self.bytes,
            "files_per_mount": round(self.files / per, 3),
            "bytes_per_mount": round(self.bytes / per),
            "efficiency": round(self.transfer_s / self.session_s, 4) if self.session_s else None,
            "mount_s_median": round(median(times), 3) if times else None,
            "mount_s_max": round(max(times), 3) if times else None,
            "held_s": round(self.session_s, 3),
        }


class ReportStore:
    """:class:`tssd.ports.reports.Efficiency` in SQL."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def efficiency(self, since: datetime, until: datetime, bins: int = 0) -> dict[str, Any]:
        """The report of mounts requested in [since, until)."""
        window = and_(Mount.requested_at >= since, Mount.requested_at < until)
        async with self.sessions() as session:
            rows = (await session.scalars(select(Mount).where(window).order_by(Mount.id))).all()
            shares = (await session.execute(_queue_shares(since, until))).all()
            mounts = [mount_record(r) for r in rows]
            finished: list[tuple[datetime | None, int | None]] = []
            if bins:
                done = _finished(plot_start(mounts, since), until)
                finished = [(at, size) for at, size in (await session.execute(done)).all()]
        shared = [(q, m, n, int(b)) for q, m, n, b in shares]
        return report(mounts, shared, since, until, bins, finished)


def report(
    mounts: Sequence[domain.Mount],
    shares: Iterable[tuple[str, int, int, int]],
    since: datetime,
    until: datetime,
    bins: int = 0,
    finished: Iterable[tuple[datetime | None, int | None]] = (),
) -> dict[str, Any]:
    """The report of *mounts* (those requested in [since, until), in id order) and the
    queue *shares* of them (:func:`_queue_shares`); with *bins*, the timeline of them and
    of *finished*: (finished_at, size) of the recalls and migrations done from
    :func:`plot_start` to *until*."""
    days = max((until - since).total_seconds() / 86400, 1 / 24)
    found = summarize([mount_json(m) for m in mounts], shares, days)
    found.update(since=iso(since), until=iso(until), days=round(days, 4))
    if bins:
        start = plot_start(mounts, since)
        started = (m.requested_at for m in mounts if m.requested_at >= start)
        found["timeline"] = _timeline(start, until, bins, finished, started)
    return found


def plot_start(mounts: Sequence[domain.Mount], since: datetime) -> datetime:
    """Where the timeline starts: at the first mount, for a quiet start of the window
    is no news."""
    return max(since, mounts[0].requested_at or since) if mounts else since


def summarize(
    mounts: list[dict[str, Any]], shares: Iterable[tuple[str, int, int, int]], days: float
) -> dict[str, Any]:
    """Totals, per drive, per tape and per queue of *mounts* (in time order)."""
    total = Tally()
    drives: defaultdict[str, Tally] = defaultdict(Tally)
    tapes: defaultdict[str, Tally] = defaultdict(Tally)
    queues: dict[str, Tally] = {}
    seen: set[str] = set()
    remount: dict[int, bool] = {}
    for m in mounts:
        remount[m["id"]] = m["volume"] in seen
        seen.add(m["volume"])
        for tally in (total, drives[m["drive"]], tapes[m["volume"]]):
            tally.add(m, remount[m["id"]], m["files"], m["bytes"])
    by_id = {m["id"]: m for m in mounts}
    for queue, mount_id, files, nbytes in shares:
        if mount_id in by_id:
            tally = queues.setdefault(queue, Tally())
            tally.add(by_id[mount_id], remount[mount_id], files, nbytes)
    worst = sorted(tapes.items(), key=lambda kv: (-kv[1].mounts, kv[0]))[:TAPES_LISTED]
    return {
        "total": {**total.summary(days), "tapes": len(tapes)},
        "drives": [{"drive": d, **t.summary(days)} for d, t in sorted(drives.items())],
        "tapes": [{"volume": v, **t.summary(days)} for v, t in worst],
        "queues": [{"queue": q, **t.summary(days)} for q, t in sorted(queues.items())],
    }


def _queue_shares(since: datetime, until: datetime) -> Any:
    """(queue, mount id, files, bytes) of the requests each mount finished per queue."""
    served = and_(
        Request.volume == Mount.volume,
        Request.drive == Mount.drive,
        Request.finished_at >= Mount.requested_at,
        or_(Mount.dismounted_at.is_(None), Request.finished_at <= Mount.dismounted_at),
    )
    return (
        select(Request.queue, Mount.id, func.count(), func.coalesce(func.sum(Request.size), 0))
        .join(Mount, served)
        .where(
            Request.state == "done",
            Mount.requested_at >= since,
            Mount.requested_at < until,
        )
        .group_by(Request.queue, Mount.id)
    )


def _finished(since: datetime, until: datetime) -> Any:
    """(finished_at, size) of the recalls and migrations done in [since, until)."""
    return select(Request.finished_at, Request.size).where(
        Request.state == "done",
        Request.kind.in_(("recall", "migrate")),
        Request.finished_at >= since,
        Request.finished_at < until,
    )


def _timeline(
    since: datetime,
    until: datetime,
    bins: int,
    finished: Iterable[tuple[datetime | None, int | None]],
    started: Iterable[datetime | None],
) -> dict[str, Any]:
    """Bytes and files finished, and mounts started, per time bin of the window."""
    bins = max(1, min(bins, MAX_BINS))
    width = (until - since).total_seconds() / bins
    nbytes, files, mounts = [0] * bins, [0] * bins, [0] * bins

    def index(at: datetime | None) -> int | None:
        if at is None or width <= 0:
            return None
        i = int((at - since).total_seconds() // width)
        return i if 0 <= i < bins else None

    for at, size in finished:
        if (i := index(at)) is not None:
            nbytes[i] += size or 0
            files[i] += 1
    for at in started:
        if (i := index(at)) is not None:
            mounts[i] += 1
    return {"start": iso(since), "bin_s": width, "bytes": nbytes, "files": files, "mounts": mounts}

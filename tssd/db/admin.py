"""Operator queries: queues, drives, tapes and mount history (``tssctl`` and /v1 admin).

:class:`AdminStore` implements :class:`tssd.ports.reports.Admin` in SQL (the memory one:
:mod:`tssd.db.memory_reports`, which shares the shaping helpers below). Everything here
reads or writes the durable tables; the live drive view (busy, the volume in a drive this
very moment) is merged in by the caller from the DriveManager.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd import domain
from tssd.config.queues import QueueSettings
from tssd.db.counts import Counts, Group
from tssd.db.models import (
    OPEN_STATE_SQL,
    OPEN_STATES,
    Drive,
    Kind,
    Mount,
    QueueRow,
    Request,
    State,
    Tape,
    utcnow,
)
from tssd.db.views import drive_record, mount_record
from tssd.errors import Conflict, NotFound
from tssd.ports.reports import UNSET, Admin, MountFilter, iso, mount_json

log = structlog.get_logger()

DAY = timedelta(days=1)
IN_CHUNK = 1000  # volumes per IN list


class AdminStore:
    """Queues, drives, tapes and mounts as operators see them."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], tally: Counts | None = None
    ) -> None:
        self.sessions = sessions
        #: The daemon's shared counts (bounded cost at a million requests); a fresh one
        #: counts on every call.
        self.tally = tally if tally is not None else Counts(sessions)

    # -- queues -------------------------------------------------------------------------

    async def queues(self, always: str | None = None) -> list[dict[str, Any]]:
        """Configured queues, queues with open requests and *always*, with their load."""
        async with self.sessions() as session:
            rows = {q.name: q for q in (await session.scalars(select(QueueRow))).all()}
        return queue_loads(rows, await self.tally.get(), always)

    async def set_queue(
        self,
        name: str,
        *,
        priority: int | None = None,
        max_drives: Any = UNSET,
        paused: bool | None = None,
        latency_target_s: Any = UNSET,
    ) -> dict[str, Any]:
        """Create or change a queue; only the given fields change."""
        for attempt in range(2):
            try:
                async with self.sessions.begin() as session:
                    row = await session.get(QueueRow, name)
                    if row is None:
                        row = QueueRow(name=name, priority=0, max_drives=None, paused=False)
                        session.add(row)
                    if priority is not None:
                        row.priority = priority
                    if max_drives is not UNSET:
                        row.max_drives = max_drives
                    if paused is not None:
                        row.paused = paused
                    if latency_target_s is not UNSET:
                        row.latency_target_s = latency_target_s
                break
            except IntegrityError as exc:  # created concurrently: change that row instead
                if attempt:
                    raise Conflict(f"queue {name} changed concurrently; try again") from exc
        return next(q for q in await self.queues() if q["name"] == name)

    async def seed_queues(self, queues: Sequence[QueueSettings]) -> None:
        await seed_queues(self, queues)

    # -- drives -------------------------------------------------------------------------

    async def drives(self) -> list[dict[str, Any]]:
        day_ago = utcnow() - DAY
        recent = (
            select(Mount.drive, func.count(), func.max(Mount.requested_at))
            .where(Mount.requested_at >= day_ago)
            .group_by(Mount.drive)
        )
        async with self.sessions() as session:
            rows = (await session.scalars(select(Drive).order_by(Drive.name))).all()
            mounts = {d: (n, last) for d, n, last in (await session.execute(recent)).all()}
        return [drive_json(drive_record(d), mounts.get(d.name, (0, None))) for d in rows]

    async def set_drive_enabled(self, name: str, enabled: bool) -> None:
        async with self.sessions.begin() as session:
            result = await session.execute(
                update(Drive).where(Drive.name == name).values(enabled=enabled, updated_at=utcnow())
            )
        if not getattr(result, "rowcount", 1):
            raise NotFound(f"no drive {name}")

    # -- tapes --------------------------------------------------------------------------

    async def tapes(
        self,
        limit: int,
        after: str | None = None,
        queued: Mapping[str, tuple[int, int]] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Tapes known to tssd (mounted once or with recalls waiting), by volume name, one
        page at a time: no query reads more than the page's rows (issue 22).

        *queued*: (count, bytes) of the queued recalls per volume as the scheduler's
        in-memory index holds them (the ``tssd`` policy); only the few active recalls are
        then counted in the database. Without it the page's open recalls are counted
        there: at 200 recalls a tape, a page of 200 tapes reads 40,000 rows.
        """
        day_ago = utcnow() - DAY
        async with self.sessions() as session:
            active: dict[str, tuple[int, int]] = {}
            if queued is not None:
                stmt = _recalls_per_volume().where(Request.state == State.ACTIVE)
                active = {v: (n, int(b or 0)) for v, n, b in (await session.execute(stmt)).all()}
            volumes = await _page_volumes(session, limit, after, queued, active)
            page, more = volumes[:limit], len(volumes) > limit
            tapes: dict[str, Tape] = {}
            waiting: dict[str, tuple[int, int]] = {}
            mounts_24h: dict[str, int] = {}
            for i in range(0, len(page), IN_CHUNK):
                chunk = page[i : i + IN_CHUNK]
                known = select(Tape).where(Tape.volume.in_(chunk))
                tapes.update((t.volume, t) for t in (await session.scalars(known)).all())
                if queued is None:
                    stmt = _recalls_per_volume().where(text(OPEN_STATE_SQL))
                    stmt = stmt.where(Request.volume.in_(chunk))
                    waiting.update((v, (n, int(b or 0))) for v, n, b in await session.execute(stmt))
                recent = (
                    select(Mount.volume, func.count())
                    .where(Mount.requested_at >= day_ago, Mount.volume.in_(chunk))
                    .group_by(Mount.volume)
                )
                mounts_24h.update((v, n) for v, n in (await session.execute(recent)).all())
            holders = dict((await session.execute(select(Drive.volume, Drive.name))).all())
        if queued is not None:
            for v in page:
                (q, qb), (a, ab) = queued.get(v, (0, 0)), active.get(v, (0, 0))
                waiting[v] = (q + a, qb + ab)
        found = [
            tape_json(v, tapes.get(v), waiting.get(v, (0, 0)), mounts_24h.get(v, 0), holders.get(v))
            for v in page
        ]
        return found, (page[-1] if more and page else None)

    async def tape(self, volume: str, history: int = 20) -> dict[str, Any]:
        """One tape: its counters, requests by state, the drive holding it, last mounts."""
        day_ago = utcnow() - DAY
        by_state = (
            select(Request.state, func.count(), func.coalesce(func.sum(Request.size), 0))
            .where(Request.volume == volume)
            .group_by(Request.state)
        )
        last = select(Mount).where(Mount.volume == volume).order_by(Mount.id.desc()).limit(history)
        async with self.sessions() as session:
            row = await session.get(Tape, volume)
            states = (await session.execute(by_state)).all()
            mounts = list((await session.scalars(last)).all())
            holder = await session.scalar(select(Drive.name).where(Drive.volume == volume))
        if row is None and not states and not mounts:
            raise NotFound(f"no tape {volume} known to tssd (never mounted, no requests)")
        queued = next(((n, int(b or 0)) for s, n, b in states if s == "queued"), (0, 0))
        recent = sum(1 for m in mounts if m.requested_at >= day_ago)
        return {
            **tape_json(volume, row, queued, recent, holder),
            "requests": {s: {"count": n, "bytes": int(b or 0)} for s, n, b in states},
            "history": [mount_json(mount_record(m)) for m in reversed(mounts)],
        }

    # -- mounts -------------------------------------------------------------------------

    async def mounts(self, flt: MountFilter) -> tuple[list[dict[str, Any]], int | None]:
        """Mount history in id (= time) order; the id to continue after, if more match."""
        order = Mount.id.desc() if flt.newest else Mount.id
        stmt = select(Mount).order_by(order).limit(flt.limit + (0 if flt.newest else 1))
        if flt.since is not None:
            # A mount still open at `since` belongs to the window too.
            stmt = stmt.where(
                (Mount.requested_at >= flt.since)
                | (Mount.dismounted_at.is_(None))
                | (Mount.dismounted_at >= flt.since)
            )
        if flt.until is not None:
            stmt = stmt.where(Mount.requested_at < flt.until)
        if flt.drive:
            stmt = stmt.where(Mount.drive == flt.drive)
        if flt.volume:
            stmt = stmt.where(Mount.volume == flt.volume)
        if flt.after is not None:
            stmt = stmt.where(Mount.id > flt.after)
        async with self.sessions() as session:
            rows = list((await session.scalars(stmt)).all())
        if flt.newest:
            return [mount_json(mount_record(r)) for r in reversed(rows)], None
        more = len(rows) > flt.limit
        rows = rows[: flt.limit]
        return [mount_json(mount_record(r)) for r in rows], (rows[-1].id if more else None)


async def seed_queues(admin: Admin, queues: Sequence[QueueSettings]) -> None:
    """:meth:`tssd.ports.reports.Admin.seed_queues` through *admin*'s ``set_queue``."""
    for q in queues:
        given = {k: getattr(q, k) for k in q.given}
        await admin.set_queue(
            q.name,
            priority=given.get("priority"),
            max_drives=given.get("max_drives", UNSET),
            paused=given.get("paused"),
            latency_target_s=given.get("latency_target_s", UNSET),
        )
        log.info("queue.seeded", queue=q.name, **given)


def queue_loads(
    rows: Mapping[str, QueueRow], groups: Iterable[Group], always: str | None
) -> list[dict[str, Any]]:
    """The queues of *rows* (configured), of the open *groups* and *always*, by name,
    with the load the open groups give them."""
    found: dict[str, dict[str, Any]] = {name: _queue(name, q) for name, q in rows.items()}
    if always is not None and always not in found:
        found[always] = _queue(always, None)
    oldest: dict[str, datetime] = {}
    for g in groups:
        if g.state not in OPEN_STATES:
            continue
        entry = found.setdefault(g.queue, _queue(g.queue, None))
        entry[g.state] += g.count
        entry[f"{g.state}_bytes"] += g.bytes
        stamp = g.oldest
        if g.state == "queued" and stamp is not None:
            oldest[g.queue] = min(stamp, oldest.get(g.queue, stamp))
    for queue, stamp in oldest.items():
        found[queue]["oldest_queued_at"] = iso(stamp)
    return [found[name] for name in sorted(found)]


def drive_json(drive: domain.Drive, recent: tuple[int, datetime | None]) -> dict[str, Any]:
    """A drive as :meth:`tssd.ports.reports.Admin.drives` lists it; *recent*: its mounts
    of the last day and the newest one's time."""
    return {
        "name": drive.name,
        "enabled": drive.enabled,
        "state": drive.state if drive.enabled else "disabled",
        "volume": drive.volume,
        "updated_at": iso(drive.updated_at),
        "mounts_24h": recent[0],
        "last_mount_at": iso(recent[1]),
    }


def _recalls_per_volume() -> Any:
    return (
        select(Request.volume, func.count(), func.coalesce(func.sum(Request.size), 0))
        .where(Request.kind == Kind.RECALL, Request.volume.is_not(None))
        .group_by(Request.volume)
    )


async def _page_volumes(
    session: AsyncSession,
    limit: int,
    after: str | None,
    queued: Mapping[str, Any] | None,
    active: Mapping[str, Any],
) -> list[str]:
    """The first *limit* + 1 volumes after *after*: known tapes, and tapes with open
    recalls (*queued* and *active*, else read from the database in volume order)."""
    known = select(Tape.volume).order_by(Tape.volume).limit(limit + 1)
    if after is not None:
        known = known.where(Tape.volume > after)
    volumes = set((await session.scalars(known)).all())
    if queued is None:
        # The literal state condition, as the open-key partial index spells it; in volume
        # order, stopping after the page (ix_requests_volume_position).
        stmt = select(Request.volume).where(
            Request.kind == Kind.RECALL, Request.volume.is_not(None), text(OPEN_STATE_SQL)
        )
        if after is not None:
            stmt = stmt.where(Request.volume > after)
        stmt = stmt.distinct().order_by(Request.volume).limit(limit + 1)
        volumes.update(v for v in (await session.scalars(stmt)).all() if v)
    else:
        candidates = (v for v in (*queued, *active) if after is None or v > after)
        volumes.update(heapq.nsmallest(limit + 1, candidates))
    return sorted(volumes)[: limit + 1]


def _queue(name: str, row: QueueRow | None) -> dict[str, Any]:
    return {
        "name": name,
        "configured": row is not None,
        "priority": row.priority if row else 0,
        "max_drives": row.max_drives if row else None,
        "paused": row.paused if row else False,
        "latency_target_s": row.latency_target_s if row else None,
        "queued": 0,
        "active": 0,
        "queued_bytes": 0,
        "active_bytes": 0,
        "oldest_queued_at": None,
    }


def tape_json(
    volume: str, row: Tape | None, waiting: tuple[int, int], mounts_24h: int, drive: str | None
) -> dict[str, Any]:
    return {
        "volume": volume,
        "state": row.state if row else "ok",
        "mounts": row.mounts if row else 0,
        "mounts_24h": mounts_24h,
        "last_mounted_at": iso(row.last_mounted_at) if row else None,
        "pending": waiting[0],
        "pending_bytes": waiting[1],
        "drive": drive,
    }

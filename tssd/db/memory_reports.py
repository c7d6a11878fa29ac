"""The operator's reads and settings (:mod:`tssd.ports.reports`) on the in-memory store.

:class:`MemoryGlance`, :class:`MemoryAdmin`, :class:`MemoryEfficiency` and
:class:`MemoryGauges` read the rows of a :class:`~tssd.db.memory.MemoryStore` (requests
and queues) and of a :class:`~tssd.db.memory_mounts.MemoryMounts` (drives, mounts, each
tape's mount count), the state the scheduler on memory writes; they shape their answers
with the SQL implementations' own helpers, so both answer alike
(``tests/integration/test_reports_contract.py``).

Two figures the memory mounts do not keep are derived: a drive's ``updated_at`` is its
last mount event or enable/disable (else when the reads were made), and every tape's
state is ``ok`` (nothing in memory marks a tape suspect). One process owns a memory
store, so a drive's ``instance`` is the store's.

A scan of every row answers each call: these are for tests, not for a million requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tssd import domain
from tssd.config.queues import QueueSettings
from tssd.db.admin import AdminStore, drive_json, queue_loads, seed_queues, tape_json
from tssd.db.counts import Group
from tssd.db.gauges import GaugeStore
from tssd.db.glance import OPEN_SCAN, GlanceStore, open_by_drive, window
from tssd.db.memory import MemoryStore
from tssd.db.memory_mounts import MemoryMounts, MountRow
from tssd.db.models import QueueRow, Tape, utcnow
from tssd.db.reports import ReportStore, plot_start, report
from tssd.domain import OPEN_STATES, Kind, State
from tssd.errors import NotFound
from tssd.ports.reports import (
    UNSET,
    Admin,
    Efficiency,
    Gauges,
    Glance,
    MountFilter,
    mount_json,
)

DAY = timedelta(days=1)


class MemoryReads:
    """The rows the four ports read, shared with the store and the mounts they are built
    on (nothing is copied: a change there is seen here at once)."""

    def __init__(self, store: MemoryStore, mounts: MemoryMounts) -> None:
        self.store = store
        self.book = mounts
        #: When each drive was last enabled or disabled here.
        self.touched: dict[str, datetime] = {}
        self.made_at = utcnow()

    def requests(self) -> Iterator[dict[str, Any]]:
        # The store's own rows (a dict per request): read, never written, here.
        return iter(self.store._rows.values())

    def queue_rows(self) -> dict[str, QueueRow]:
        return {name: QueueRow(**q) for name, q in sorted(self.store._queues.items())}

    def mount(self, row: MountRow) -> domain.Mount:
        return domain.Mount(
            id=row.id, drive=row.drive, volume=row.volume, purpose=str(row.purpose),
            requested_at=row.requested_at, ready_at=row.ready_at,
            dismounted_at=row.dismounted_at, files=row.files, bytes=row.nbytes,
            transfer_s=row.transfer_s,
        )  # fmt: skip

    def mounts(self) -> list[domain.Mount]:
        """Every mount, oldest (lowest id) first."""
        return [self.mount(row) for row in self.book.mounts]

    def drive_names(self) -> list[str]:
        return sorted(set(self.book.enabled) | set(self.book.holding))

    def drive(self, name: str) -> domain.Drive:
        enabled = self.book.enabled.get(name, True)
        volume = self.book.holding.get(name)
        return domain.Drive(
            name=name, enabled=enabled, state="mounted" if volume else "empty", volume=volume,
            updated_at=self._updated_at(name), instance=self.store.instance,
        )  # fmt: skip

    def _updated_at(self, name: str) -> datetime:
        stamps = [self.touched.get(name, self.made_at)]
        for m in self.book.mounts:
            if m.drive == name:
                stamps += [at for at in (m.ready_at, m.dismounted_at) if at is not None]
        return max(stamps)

    def tape(self, volume: str) -> Tape | None:
        """The tape's counters as the ``tapes`` row holds them; None if never mounted."""
        count = self.book.tape_mounts.get(volume)
        if count is None:
            return None
        ready = [m.ready_at for m in self.book.mounts if m.volume == volume and m.ready_at]
        return Tape(
            volume=volume, state="ok", mounts=count, last_mounted_at=max(ready, default=None)
        )

    def per_volume(self, states: Iterable[str]) -> dict[str, tuple[int, int]]:
        """(count, bytes) of the recalls in *states* per volume."""
        wanted = set(states)
        found: dict[str, tuple[int, int]] = {}
        for r in self.requests():
            if r["kind"] == Kind.RECALL and r["volume"] is not None and r["state"] in wanted:
                n, b = found.get(r["volume"], (0, 0))
                found[r["volume"]] = (n + 1, b + (r["size"] or 0))
        return found


class MemoryGlance:
    """:class:`tssd.ports.reports.Glance` in memory."""

    def __init__(self, reads: MemoryReads) -> None:
        self.reads = reads

    async def drives(self) -> list[domain.Drive]:
        return [self.reads.drive(name) for name in self.reads.drive_names()]

    async def open_mounts(self) -> dict[str, domain.Mount]:
        return open_by_drive(await self.last_mounts(OPEN_SCAN))

    async def active_per_drive(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for r in self.reads.requests():
            if r["state"] == State.ACTIVE and r["drive"] is not None:
                n, b = found.get(r["drive"], (0, 0))
                found[r["drive"]] = (n + 1, b + (r["size"] or 0))
        return found

    async def last_mounts(self, limit: int) -> list[domain.Mount]:
        newest = self.reads.book.mounts[::-1][:limit]
        return [self.reads.mount(row) for row in newest]

    async def mounts_since(self, since: datetime, limit: int) -> tuple[list[domain.Mount], bool]:
        return window(await self.last_mounts(limit + 1), since, limit)


class MemoryAdmin:
    """:class:`tssd.ports.reports.Admin` in memory."""

    def __init__(self, reads: MemoryReads) -> None:
        self.reads = reads

    async def queues(self, always: str | None = None) -> list[dict[str, Any]]:
        return queue_loads(self.reads.queue_rows(), self._open_groups(), always)

    def _open_groups(self) -> list[Group]:
        """The open requests per (kind, queue, state), as the SQL counts give them."""
        groups: dict[tuple[str, str, str], tuple[int, int, datetime | None]] = {}
        for r in self.reads.requests():
            if r["state"] not in OPEN_STATES:
                continue
            key = (r["kind"], r["queue"], r["state"])
            n, b, oldest = groups.get(key, (0, 0, None))
            created = r["created_at"] if oldest is None else min(oldest, r["created_at"])
            groups[key] = (n + 1, b + (r["size"] or 0), created)
        return [Group(*key, n, b, oldest) for key, (n, b, oldest) in groups.items()]

    async def set_queue(
        self,
        name: str,
        *,
        priority: int | None = None,
        max_drives: Any = UNSET,
        paused: bool | None = None,
        latency_target_s: Any = UNSET,
    ) -> dict[str, Any]:
        given = {"priority": priority, "paused": paused}
        changes = {k: v for k, v in given.items() if v is not None}
        changes.update(
            (k, v)
            for k, v in (("max_drives", max_drives), ("latency_target_s", latency_target_s))
            if v is not UNSET
        )
        self.reads.store.set_queue(name, **changes)
        return next(q for q in await self.queues() if q["name"] == name)

    async def seed_queues(self, queues: Sequence[QueueSettings]) -> None:
        await seed_queues(self, queues)

    async def drives(self) -> list[dict[str, Any]]:
        day_ago = utcnow() - DAY
        recent: dict[str, tuple[int, datetime | None]] = {}
        for m in self.reads.book.mounts:
            if m.requested_at >= day_ago:
                n, last = recent.get(m.drive, (0, None))
                recent[m.drive] = (
                    n + 1,
                    m.requested_at if last is None else max(last, m.requested_at),
                )
        names = self.reads.drive_names()
        return [drive_json(self.reads.drive(d), recent.get(d, (0, None))) for d in names]

    async def set_drive_enabled(self, name: str, enabled: bool) -> None:
        if name not in self.reads.drive_names():
            raise NotFound(f"no drive {name}")
        self.reads.book.enabled[name] = enabled
        self.reads.touched[name] = utcnow()

    async def tapes(
        self,
        limit: int,
        after: str | None = None,
        queued: Mapping[str, tuple[int, int]] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        if queued is None:
            waiting = self.reads.per_volume(OPEN_STATES)
        else:
            active = self.reads.per_volume([State.ACTIVE])
            waiting = {
                v: (queued.get(v, (0, 0))[0] + n, queued.get(v, (0, 0))[1] + b)
                for v, (n, b) in active.items()
            }
            waiting |= {v: q for v, q in queued.items() if v not in active}
        candidates = set(self.reads.book.tape_mounts) | set(waiting)
        volumes = sorted(v for v in candidates if after is None or v > after)
        page, more = volumes[:limit], len(volumes) > limit
        day_ago = utcnow() - DAY
        recent = Counter(m.volume for m in self.reads.book.mounts if m.requested_at >= day_ago)
        holders = {v: d for d, v in self.reads.book.holding.items() if v is not None}
        found = [
            tape_json(v, self.reads.tape(v), waiting.get(v, (0, 0)), recent[v], holders.get(v))
            for v in page
        ]
        return found, (page[-1] if more and page else None)

    async def tape(self, volume: str, history: int = 20) -> dict[str, Any]:
        states: dict[str, tuple[int, int]] = {}
        for r in self.reads.requests():
            if r["volume"] == volume:
                n, b = states.get(r["state"], (0, 0))
                states[r["state"]] = (n + 1, b + (r["size"] or 0))
        mounts = [m for m in self.reads.mounts() if m.volume == volume][::-1][:history]
        row = self.reads.tape(volume)
        if row is None and not states and not mounts:
            raise NotFound(f"no tape {volume} known to tssd (never mounted, no requests)")
        holder = next((d for d, v in self.reads.book.holding.items() if v == volume), None)
        day_ago = utcnow() - DAY
        recent = sum(1 for m in mounts if m.requested_at >= day_ago)
        return {
            **tape_json(volume, row, states.get("queued", (0, 0)), recent, holder),
            "requests": {s: {"count": n, "bytes": b} for s, (n, b) in states.items()},
            "history": [mount_json(m) for m in reversed(mounts)],
        }

    async def mounts(self, flt: MountFilter) -> tuple[list[dict[str, Any]], int | None]:
        rows = [m for m in self.reads.mounts() if _matches(m, flt)]
        if flt.newest:
            newest = rows[len(rows) - flt.limit :] if flt.limit > 0 else []
            return [mount_json(m) for m in newest], None
        page = rows[: flt.limit]
        more = len(rows) > flt.limit
        return [mount_json(m) for m in page], (page[-1].id if more and page else None)


def _matches(m: domain.Mount, flt: MountFilter) -> bool:
    if flt.since is not None and not (
        m.requested_at >= flt.since or m.dismounted_at is None or m.dismounted_at >= flt.since
    ):
        return False  # a mount still open at `since` belongs to the window too
    if flt.until is not None and m.requested_at >= flt.until:
        return False
    if (flt.drive and m.drive != flt.drive) or (flt.volume and m.volume != flt.volume):
        return False
    return flt.after is None or m.id > flt.after


class MemoryEfficiency:
    """:class:`tssd.ports.reports.Efficiency` in memory."""

    def __init__(self, reads: MemoryReads) -> None:
        self.reads = reads

    async def efficiency(self, since: datetime, until: datetime, bins: int = 0) -> dict[str, Any]:
        mounts = [m for m in self.reads.mounts() if since <= m.requested_at < until]
        done = [r for r in self.reads.requests() if r["state"] == State.DONE]
        shares: Counter[tuple[str, int]] = Counter()
        sizes: Counter[tuple[str, int]] = Counter()
        for m in mounts:
            for r in done:
                if _served(r, m):
                    shares[(r["queue"], m.id)] += 1
                    sizes[(r["queue"], m.id)] += r["size"] or 0
        shared = [(q, mid, n, sizes[(q, mid)]) for (q, mid), n in shares.items()]
        start = plot_start(mounts, since)
        finished = [
            (r["finished_at"], r["size"])
            for r in done
            if r["kind"] in (Kind.RECALL, Kind.MIGRATE)
            and r["finished_at"] is not None
            and start <= r["finished_at"] < until
        ]
        return report(mounts, shared, since, until, bins, finished)


def _served(r: dict[str, Any], m: domain.Mount) -> bool:
    """Whether request *r* finished on the drive and tape of *m* while it was mounted."""
    at = r["finished_at"]
    return (
        r["volume"] == m.volume
        and r["drive"] == m.drive
        and at is not None
        and at >= m.requested_at
        and (m.dismounted_at is None or at <= m.dismounted_at)
    )


class MemoryGauges:
    """:class:`tssd.ports.reports.Gauges` in memory."""

    def __init__(self, reads: MemoryReads) -> None:
        self.reads = reads

    async def pauses_and_mounts(self, since: datetime) -> tuple[dict[str, bool], list[int]]:
        paused = {name: bool(q.paused) for name, q in self.reads.queue_rows().items()}
        per_tape = Counter(m.volume for m in self.reads.book.mounts if m.requested_at >= since)
        return paused, list(per_tape.values())

    async def oldest_queued(self) -> dict[str, datetime]:
        ages: dict[str, datetime] = {}
        for r in self.reads.requests():
            if r["state"] == State.QUEUED:
                ages[r["queue"]] = min(r["created_at"], ages.get(r["queue"], r["created_at"]))
        return ages


if TYPE_CHECKING:
    from tssd.db.engine import Sessions

    def _conforms(reads: MemoryReads, sessions: Sessions) -> None:
        """For mypy: the SQL and the memory implementations both satisfy each port."""
        glances: list[Glance] = [MemoryGlance(reads), GlanceStore(sessions)]
        admins: list[Admin] = [MemoryAdmin(reads), AdminStore(sessions)]
        reports: list[Efficiency] = [MemoryEfficiency(reads), ReportStore(sessions)]
        gauges: list[Gauges] = [MemoryGauges(reads), GaugeStore(sessions)]
        del glances, admins, reports, gauges

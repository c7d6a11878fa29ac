"""Work that needs no drive: locating recalls, removals, migrations already on tape."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from urllib.parse import parse_qs, urlsplit

import structlog

from tssd.backends.base import TapeBackend, TapeCopy
from tssd.clock import utcnow
from tssd.domain import Request
from tssd.errors import ObjectNotFound, PermanentBackendError, TssdError
from tssd.ports.scheduling import IntakeLedger
from tssd.retry import Retrier
from tssd.scheduler.copies import cover_copies
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.policy import Policy
from tssd.shim.names import PNFSID

log = structlog.get_logger()
#: Event-loop CPU one locate pass should take: loading, locating and planning 5,000 recalls
#: at once held the loop for over 100 ms (benchmarks/admission_load.py), so the number
#: located per pass follows the time the last passes took, between these bounds.
LOCATE_BUDGET_S = 0.015
LOCATE_MIN = 50
LOCATE_START = 250


class Intake:
    """The scheduler's work that needs no drive, each call one bounded batch: locating
    queued recalls (which tape copy to read, into the *planner* when there is one),
    carrying out removals, and finding migrations whose file is on tape already.

    It changes requests only through the store; *now* stamps the arrival of located
    recalls in the planner (the scheduler's clock).
    """

    def __init__(
        self,
        store: IntakeLedger,
        backend: TapeBackend,
        retrier: Retrier,
        policy: Policy,
        *,
        batch: int = 5000,
        planner: Planner | None = None,
        now: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.store = store
        self.backend = backend
        self.retrier = retrier
        self.policy = policy
        self.batch = batch
        #: Recalls located per pass, bounded by LOCATE_BUDGET_S (see _locate_took).
        self.locate_limit = min(batch, LOCATE_START)
        #: The scheduler's per-tape index (``tssd`` policy): located recalls go there.
        self.planner = planner
        self.now = now
        #: Whether queued recalls may be waiting for a copy: False once a pass found
        #: fewer than its limit, True again when the scheduler hears of new or requeued
        #: work (:meth:`expect_recalls`). Spares the query for them on every pass: fifo
        #: runs a pass per file.
        self._expecting = True

    def expect_recalls(self) -> None:
        """Recalls may have been queued without a copy chosen (submitted, requeued)."""
        self._expecting = True

    async def locate_recalls(self, busy_volumes: Iterable[str]) -> int:
        """Find the tape copy for queued recalls that have none yet; return how many, or
        ``batch`` when the pass filled its time-bounded limit (more may be waiting)."""
        if not self._expecting:
            return 0
        limit, started = self.locate_limit, time.thread_time()
        rows = await self.store.scheduling.unlocated(limit)
        if not rows:
            self._expecting = False
            return 0
        pnfsids = sorted({r.pnfsid for r in rows if r.pnfsid})
        copies = await self.retrier.call("locate", lambda: self.backend.locate(pnfsids))
        needed = set(busy_volumes)
        if self.policy.prefer_needed_tapes:
            needed |= await self._needed_volumes(copies)
        if self.planner is not None:
            needed |= set(self.planner.tapes)
            chosen = cover_copies([copies.get(r.pnfsid or "", []) for r in rows], needed)
        else:
            chosen = []
            for row in rows:
                copy = self.policy.choose_copy(copies.get(row.pnfsid or "", []), needed)
                chosen.append(copy)
                if copy is not None:
                    needed.add(copy.volume)
        located: dict[int, tuple[str, int]] = {}
        missing: list[int] = []
        entries: list[Entry] = []
        now = self.now()
        for row, copy in zip(rows, chosen, strict=True):
            if copy is None:
                missing.append(row.id)
                continue
            located[row.id] = (copy.volume, copy.position)
            entries.append(
                Entry(row.id, copy.volume, copy.position, copy.size or row.size or 0,
                      row.priority or 0, row.queue or "default", now)
            )  # fmt: skip
        await self.store.set_locations(located)
        if self.planner is not None:
            self.planner.add(entries)
        if missing:
            await self._fail(missing, ObjectNotFound("no copy of the file on tape"))
        self._locate_took(time.thread_time() - started, len(rows), limit)
        # Set only once every row is located or failed: a failed backend call leaves
        # them waiting, and the next pass must ask again.
        self._expecting = len(rows) >= limit
        return self.batch if len(rows) >= limit else len(rows)

    def _locate_took(self, cpu_s: float, located: int, limit: int) -> None:
        """Shrink the next pass to what fits the budget, or double it after a cheap full
        one. The loop thread's CPU while a pass runs includes other tasks': it errs small."""
        if cpu_s > LOCATE_BUDGET_S:
            fits = int(located * LOCATE_BUDGET_S / cpu_s)
            self.locate_limit = min(self.batch, max(LOCATE_MIN, fits))
        elif located >= limit and cpu_s < LOCATE_BUDGET_S / 2:
            self.locate_limit = min(self.batch, limit * 2)

    async def _needed_volumes(self, copies: dict[str, list[TapeCopy]]) -> set[str]:
        """Of the volumes holding a second copy of some file, those with recalls queued."""
        candidates = sorted({c.volume for cs in copies.values() if len(cs) > 1 for c in cs})
        return await self.store.scheduling.volumes_with_recalls(candidates)

    async def removals(self) -> int:
        """Carry out queued removals (a catalog operation: no drive needed)."""
        claimed = await self.store.scheduling.claim_removals(self.batch)
        for row in claimed:
            await self._remove(row)
        return len(claimed)

    async def _remove(self, row: Request) -> None:
        bfid = row.bfid or ""
        try:
            await self._remove_copies(row, bfid)
        except ObjectNotFound:
            # Removing what is already gone succeeds: dCache may repeat a remove.
            log.info("remove.absent", request_id=row.id, bfid=bfid)
        except TssdError as exc:
            await self.store.fail(
                row.id, type(exc).__name__, error=str(exc), error_code=exc.exit_code
            )
            log.warning(
                "request.failed", kind="remove", request_id=row.id, bfid=bfid, error=str(exc)
            )
            return
        await self.store.finish(row.id, "removed")
        log.info("request.done", kind="remove", request_id=row.id, bfid=bfid)

    async def _remove_copies(self, row: Request, bfid: str) -> None:
        """Remove the copy *bfid*; for an endit URI, every copy of the file it names.

        The endit provider reports ``osm://<name>?bfid=<pnfsid>`` (``FlushTask``): its
        bfid is the file's pnfsid, which tssd's catalogue knows as no bfid.
        """
        try:
            await self._remove_one(bfid)
            return
        except ObjectNotFound:
            if not names_a_file(row.uri, bfid):
                raise
        pnfsid = bfid.upper()
        copies = await self.retrier.call("locate", lambda: self.backend.locate([pnfsid]))
        found = copies.get(pnfsid, [])
        if not found:
            raise ObjectNotFound(f"no copy of {pnfsid} on tape")
        for copy in found:
            await self._remove_one(copy.bfid)
        log.info("remove.by_pnfsid", request_id=row.id, pnfsid=pnfsid, copies=len(found))

    async def _remove_one(self, bfid: str) -> None:
        await self.retrier.call("remove", lambda: self.backend.remove(bfid), bfid=bfid)

    async def migrations_on_tape(
        self, paused: frozenset[str] = frozenset()
    ) -> list[tuple[Request, TapeCopy]]:
        """Queued migrations whose file is on tape already with the same size and checksum."""
        rows = await self.store.scheduling.unwritten_migrations(paused, self.batch)
        if not rows:
            return []
        copies = await self.retrier.call(
            "locate", lambda: self.backend.locate(sorted({r.pnfsid or "" for r in rows}))
        )
        found = []
        for row in rows:
            match = [
                c
                for c in copies.get(row.pnfsid or "", [])
                if c.size == row.size and c.adler32 == row.checksum
            ]
            if match:
                found.append((row, match[0]))
        return found

    async def migration_groups(
        self, paused: frozenset[str] = frozenset()
    ) -> list[tuple[str, int, int, float]]:
        """(storage class, files, bytes, oldest age in s) of queued migrations outside the
        *paused* queues."""
        now = utcnow()
        rows = await self.store.scheduling.migration_groups(paused)
        return [(sc or "", n, int(b or 0), _age(now, oldest)) for sc, n, b, oldest in rows]

    async def _fail(self, ids: Sequence[int], exc: PermanentBackendError) -> None:
        await self.store.reject(ids, type(exc).__name__, error=str(exc), error_code=exc.exit_code)
        log.warning("request.failed", kind="recall", count=len(ids), error=str(exc))


def names_a_file(uri: str | None, bfid: str) -> bool:
    """Whether *uri* is an endit provider URI, ``<type>://<name>?bfid=<pnfsid>``."""
    if not uri or not PNFSID.fullmatch(bfid):
        return False
    parts = urlsplit(uri)
    return parts.path in ("", "/") and set(parse_qs(parts.query)) == {"bfid"}


def _age(now: datetime, then: datetime | None) -> float:
    if then is None:
        return 0.0
    return max(0.0, (now - then).total_seconds())

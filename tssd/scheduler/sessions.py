"""Tape sessions: read the queued recalls of one mounted tape, or write a migration batch.

A recall session keeps claiming the tape's queued requests, in position order, until
none are left ahead of the head, so requests that arrive for the mounted tape ahead of
the head join the running session. Within a claimed batch the reads may be reordered by
software RAO (``rao.py``). A session asked to yield (``PriorityTiers.ask_yield``: a
higher-priority tape waits) stops after the file it is reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import Any

import structlog

from tssd.backends.base import (
    ReadItem,
    ReadResult,
    Sink,
    Source,
    TapeBackend,
    TapeCopy,
)
from tssd.backpressure import Backpressure
from tssd.clock import Offload, inline, utcnow
from tssd.domain import Kind, Request, State
from tssd.errors import ChecksumMismatch, TransientBackendError, TssdError
from tssd.metrics import Metrics
from tssd.ports.scheduling import SessionLedger
from tssd.retry import Retrier
from tssd.scheduler.drives import DriveManager, DriveState
from tssd.scheduler.planner import Entry
from tssd.scheduler.policy import Policy
from tssd.scheduler.rao import inserts_urgent
from tssd.scheduler.reads import PlannedReads
from tssd.scheduler.tiers import PriorityTiers
from tssd.scheduler.writable import WritableBatches
from tssd.tape.geometry import Profile

log = structlog.get_logger()

SinkFactory = Callable[[Request], Sink]
SourceFactory = Callable[[Request], Source]


def error_code(exc: BaseException) -> int:
    return exc.exit_code if isinstance(exc, TssdError) else 1


class SessionRunner(WritableBatches):
    """Runs the sessions the scheduler starts: :meth:`recall` reads a tape's queued
    recalls, :meth:`migrate` writes a storage class's batch. It claims, moves and finishes
    the requests; what it did not get to goes back to the queue however a session ends.
    Drives change only through the DriveManager; the tape a migration fills is reserved
    by the drive's session object (``tiers.sessions``); which session yields or is
    interrupted is decided by *tiers*."""

    def __init__(
        self,
        store: SessionLedger,
        backend: TapeBackend,
        drives: DriveManager,
        retrier: Retrier,
        metrics: Metrics,
        *,
        tiers: PriorityTiers,
        sink_for: SinkFactory,
        source_for: SourceFactory,
        chunk: int,
        policy: Policy,
        rao: str = "off",
        offload: Offload = inline,
        urgent_elsewhere: Callable[[str], bool] = lambda volume: False,
        backpressure: Backpressure | None = None,
    ) -> None:
        self.policy = policy
        #: Runs the read-order tour of a large batch (off the event loop in real time).
        self.offload = offload
        #: Order of reads in a batch: off (position), on (RAO), auto (the cheaper).
        self.rao = rao
        #: Per volume, the layout model RAO plans on (TapeBackend.geometry; None: unknown,
        #: position order). Asked once per volume: a cartridge's geometry does not change.
        self.layouts: dict[str, Profile | None] = {}
        #: Orders each batch's reads, calibrating each tape from its locate times.
        self.reads = PlannedReads(backend, offload, rao)
        #: Whether higher-priority requests of tapes other than the given one wait for a
        #: drive (the scheduler's chooser knows): a session that came for urgent requests
        #: then leaves its ordinary ones for later.
        self.urgent_elsewhere = urgent_elsewhere
        self._claimed_entries: dict[int, Entry] = {}
        self.tiers = tiers
        self.planner = tiers.planner  # the scheduler's per-tape index (tssd policy)
        self.sessions = tiers.sessions
        #: Queues an operator paused (told by the scheduler): no session claims their work.
        self.paused: frozenset[str] = frozenset()
        #: The tape each storage class was last written to.
        self.filling: dict[str, str] = {}
        self.store = store
        self.backend = backend
        self.drives = drives
        self.retrier = retrier
        self.metrics = metrics
        self.sink_for = sink_for
        self.source_for = source_for
        self.chunk = chunk
        self.backpressure = backpressure  # recalls into full file systems wait

    def pause(self, queues: frozenset[str]) -> None:
        """The queues an operator paused now: their work is not claimed."""
        self.paused = queues

    # -- recall -----------------------------------------------------------------------

    async def recall(
        self, drive: DriveState, volume: str, queues: frozenset[str] | None = None
    ) -> None:
        """Read *volume*'s queued recalls (of *queues* only, when given) in forward passes.

        A pass moves forward: after its first chunk only requests ahead of the head join
        it; one that arrives behind the head waits for the next pass. The tape's requests
        of the highest priority are read first, or, with software RAO, in the same pass as
        the others, placed where they cost least before their deadline; later ones of a
        higher priority than the pass's interrupt it once they waited
        ``interrupt_after_s``. A session that came for higher-priority requests reads
        only those when another tape's would be late.
        """
        await self.drives.ensure_mounted(drive, volume, Kind.RECALL)
        await self._learn_layout(volume)
        if self.policy.files_per_session is not None:
            await self._pass(drive, volume, queues, None)
            return
        ordinary_read = False
        while not self.tiers.yields(drive.name):
            tier = self.tiers.top_priority(volume)
            if tier is not None and ordinary_read and not self.tiers.due(volume, 0):
                tier = None  # not waited long enough to turn the head round: in order
            # Unless this is a visit for urgent requests only, the tape's ordinary work is
            # read in the same pass, the urgent requests placed early in its read order.
            combine = (
                tier is not None
                and inserts_urgent(self.layouts.get(volume), self.rao)
                and (ordinary_read or not self.urgent_elsewhere(volume))
            )
            if await self._pass(drive, volume, queues, tier, combine=combine):
                if tier is None or combine:
                    ordinary_read = True
                elif not ordinary_read and self.urgent_elsewhere(volume):
                    return  # a visit for urgent requests: others wait for this drive
                continue
            # Nothing claimable at that priority (paused queue, held): serve the rest,
            # without letting those requests interrupt the pass again.
            if tier is None or not await self._pass(drive, volume, queues, None, floor=tier):
                return

    async def _pass(
        self,
        drive: DriveState,
        volume: str,
        queues: frozenset[str] | None,
        tier: int | None,
        *,
        floor: int | None = None,
        combine: bool = False,
    ) -> int:
        """One forward pass over the requests of priority >= *tier*; how many it claimed.

        Requests of a priority above *floor* (default: *tier*) interrupt it. With
        *combine*, once it claimed some of those, it claims the others too and reads all
        as ordinary work (:func:`order_reads` places the higher-priority ones early).
        """
        budget = self.policy.files_per_session
        head: int | None = None
        total = 0
        self.drives.begin_pass(drive)
        self.tiers.set_floor(drive.name, tier if floor is None else floor)
        while (budget is None or budget > 0) and not self.tiers.interrupted(drive.name, volume):
            limit = self.chunk if budget is None else min(budget, self.chunk)
            claimed = await self._claim(
                drive, volume, queues, limit, min_priority=tier,
                after=head if self.policy.position_order else None,
                by_position=self.policy.position_order,
            )  # fmt: skip
            if not claimed:
                break
            if combine and tier is not None:  # then the rest, of any priority
                claimed += await self._claim(drive, volume, queues, limit - len(claimed))
                tier = None
                self.tiers.set_floor(drive.name, None)
            self._taken(claimed)
            total += len(claimed)
            if budget is not None:
                budget -= len(claimed)
            head = max(r.position or 0 for r in claimed)
            await self._read_batch(drive, volume, claimed)
        return total

    async def _claim(
        self,
        drive: DriveState,
        volume: str,
        queues: frozenset[str] | None,
        limit: int,
        *,
        min_priority: int | None = None,
        after: int | None = None,
        by_position: bool = True,
    ) -> list[Request]:
        """Claim up to *limit* queued recalls of *volume* a session may read (of *queues*,
        when given): not of a paused queue, not into a nearly full file system."""
        if limit <= 0:
            return []
        held = self.backpressure.held_prefixes() if self.backpressure is not None else ()
        return await self.store.scheduling.claim_recalls(
            volume, drive.name, limit, queues=queues, paused=self.paused, held=held,
            min_priority=min_priority, after=after, by_position=by_position,
        )  # fmt: skip

    def claimed_on(self, volume: str) -> tuple[int, int]:
        """Recalls of *volume* claimed by a session and not read yet: (count, bytes)."""
        entries = [e for e in self._claimed_entries.values() if e.volume == volume]
        return len(entries), sum(e.size for e in entries)

    def _taken(self, claimed: Sequence[Request]) -> None:
        if self.planner is not None:
            for entry in self.planner.take(r.id for r in claimed):
                self._claimed_entries[entry.id] = entry

    def _given_back(self, ids: Sequence[int]) -> None:
        """Requests that return to the queue rejoin the planner with their arrival."""
        entries = [e for i in ids if (e := self._claimed_entries.pop(i, None)) is not None]
        if self.planner is not None and entries:
            self.planner.add(entries)

    async def _learn_layout(self, volume: str) -> None:
        # At every mount until a drive has reported the tape's own (another drive may).
        known = self.layouts.get(volume)
        if self.rao == "off" or (known is not None and known.wrap_ends):
            return
        try:
            self.layouts[volume] = await self.backend.geometry(volume)
        except TransientBackendError as exc:
            log.warning("recall.geometry.unknown", volume=volume, error=str(exc))
            return  # position order this time; asked again at the next mount

    async def _read_batch(self, drive: DriveState, volume: str, claimed: list[Request]) -> None:
        pending = {r.id: r for r in claimed}
        floor = self.tiers.floor(drive.name) or 0
        layout = self.layouts.get(volume)
        placed = inserts_urgent(layout, self.rao)
        # Higher-priority requests claimed with the pass: placed early in the read order
        # when RAO can, else read first once they are due (see _interrupted).
        self.tiers.hold(drive.name, {
            r.id: (r.priority, e.arrived if (e := self._claimed_entries.get(r.id)) else 0.0)
            for r in claimed
            if r.priority > floor and not placed
        })  # fmt: skip
        try:
            by_item = await self._read_items(volume, claimed, pending)
            batch = [i for i, _ in by_item.values()]
            urgent = {
                k: self.tiers.read_within(self._claimed_entries.get(r.id))
                for k, (_, r) in by_item.items()
                if r.priority > floor
            }
            reads = self.reads.read(drive, volume, layout, batch, urgent, self.drives.clock.now)
            async with aclosing(reads) as results:
                async for result in results:
                    request = by_item[id(result.item)][1]
                    pending.pop(request.id, None)
                    self.tiers.reached(drive.name, request.id)
                    end = result.item.copy.offset + result.item.copy.size
                    self.drives.head_moved(drive, end, request.position or 0)
                    await self._finish_read(drive, request, result)
                    self._claimed_entries.pop(request.id, None)
                    if self.tiers.interrupted(drive.name, volume):
                        break  # a higher-priority tape or request waits for this drive
        except TssdError as exc:
            if not isinstance(exc, TransientBackendError):
                for request in await self._strike(pending, exc):
                    self._claimed_entries.pop(request.id, None)
            raise
        finally:
            self.tiers.batch_done(drive.name)
            # Whatever the session did not get to goes back to the queue.
            moved = await self.store.requeue(list(pending), "session ended")
            self._given_back(moved)
            await self.drives.flush_stats(drive)

    async def _read_items(
        self, volume: str, claimed: list[Request], pending: dict[int, Request]
    ) -> dict[int, tuple[ReadItem, Request]]:
        """ReadItems in claim (position) order, keyed by id() of the item."""
        pnfsids = sorted({r.pnfsid for r in claimed if r.pnfsid})
        copies = await self.retrier.call("locate", lambda: self.backend.locate(pnfsids))
        by_item: dict[int, tuple[ReadItem, Request]] = {}
        moved: list[int] = []
        if self.backpressure is not None:
            claimed, held = self.backpressure.admit(claimed)
            await self._requeue(held, pending, "destination disk full")
        for request in claimed:
            copy = _copy_on(copies.get(request.pnfsid or "", []), volume, request.position)
            if copy is None:
                moved.append(request.id)
                continue
            item = ReadItem(copy=copy, sink=self.sink_for(request))
            by_item[id(item)] = (item, request)
        if moved:
            # The catalog changed since these were located: locate them again.
            for request_id in moved:
                pending.pop(request_id, None)
                self._claimed_entries.pop(request_id, None)
            await self.store.relocate(moved, "copy moved")
        return by_item

    async def _finish_read(self, drive: DriveState, request: Request, result: ReadResult) -> None:
        fields = {
            "pnfsid": request.pnfsid,
            "volume": result.item.copy.volume,
            "drive": drive.name,
            "request_id": request.id,
        }
        if result.error is not None:
            await self.drives.failed(drive, result.item.copy.volume, result.error, "read")
            if self.backpressure and self.backpressure.absorbs(request, result.error):
                await self._requeue([request], {}, "destination disk full")
                return
            await self._fail(request, result.error, **fields)
            return
        self.drives.succeeded(drive, result.item.copy.volume)
        if request.checksum and result.adler32 and request.checksum != result.adler32:
            await self._fail(request, _mismatch(request.checksum, result.adler32), **fields)
            return
        self.drives.account(drive, result.nbytes, result.transfer_s, result.locate_s)
        self.metrics.transfer_bytes_total.labels(kind="recall").inc(result.nbytes)
        if await self.store.finish(
            request.id, "recalled", result_adler32=result.adler32, size=result.nbytes
        ):
            self._observe(request, State.DONE)
            log.info("request.done", kind="recall", bytes=result.nbytes, **fields)
        else:
            # Cancelled while on tape: take back the file nobody waits for any more.
            await result.item.sink.retract()
            log.info("recall.retracted", **fields)

    # -- shared -----------------------------------------------------------------------

    async def _fail(self, request: Request, exc: BaseException, **fields: Any) -> None:
        if isinstance(exc, TransientBackendError) and self.retrier.another_attempt(
            request.attempts, op=f"{request.kind}_item", error=exc, **fields
        ):
            # Back to the queue (on the same tape) after a backoff delay: a later session
            # reads it again.
            self.retrier.later(
                request.attempts,
                lambda: self.store.requeue(
                    [request.id], "transient backend error", error=str(exc)
                ),
                request_id=request.id,
            )  # fmt: skip
            return
        code = error_code(exc)
        if await self.store.fail(request.id, type(exc).__name__, error=str(exc), error_code=code):
            self._observe(request, State.FAILED)
            log.warning(
                "request.failed", kind=request.kind, error=str(exc), error_code=code, **fields
            )

    async def _requeue(self, held: list[Request], pending: dict[int, Request], why: str) -> None:
        for request in held:
            pending.pop(request.id, None)
        moved = await self.store.requeue([r.id for r in held], why)
        self._given_back(moved)

    def _observe(self, request: Request, outcome: State) -> None:
        # tssd_requests_total is counted by the store, which sees every way a request ends.
        latency = (utcnow() - request.created_at).total_seconds()
        self.metrics.request_duration.labels(request.kind, request.queue).observe(latency)
        if outcome is State.DONE:
            self.drives.activity.finished(request.queue, latency, self.drives.clock.now())


def _copy_on(copies: Sequence[TapeCopy], volume: str, position: int | None) -> TapeCopy | None:
    on_volume = [c for c in copies if c.volume == volume]
    exact = [c for c in on_volume if c.position == position]
    found = exact or on_volume
    return found[0] if found else None


def _mismatch(expected: str, actual: str) -> ChecksumMismatch:
    return ChecksumMismatch(f"adler32 {actual} does not match the expected {expected}")

"""Tape sessions: read the queued recalls of one mounted tape, or write a migration batch.

A recall session keeps claiming the tape's queued requests, in position order, until
none are left, so requests that arrive for the mounted tape join the running session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC
from typing import Any

import structlog
from sqlalchemy import select

from tssd.backends.base import (
    ReadItem,
    ReadResult,
    Sink,
    Source,
    TapeBackend,
    TapeCopy,
    WriteItem,
    WriteResult,
)
from tssd.db.models import Kind, Request, State, utcnow
from tssd.db.store import RequestStore
from tssd.errors import ChecksumMismatch, TransientBackendError, TssdError
from tssd.metrics import Metrics
from tssd.retry import Retrier
from tssd.scheduler.drives import DriveManager, DriveState
from tssd.scheduler.policy import Policy
from tssd.submit import make_uri

log = structlog.get_logger()

SinkFactory = Callable[[Request], Sink]
SourceFactory = Callable[[Request], Source]


def error_code(exc: BaseException) -> int:
    return exc.exit_code if isinstance(exc, TssdError) else 1


class SessionRunner:
    def __init__(
        self,
        store: RequestStore,
        backend: TapeBackend,
        drives: DriveManager,
        retrier: Retrier,
        metrics: Metrics,
        *,
        sink_for: SinkFactory,
        source_for: SourceFactory,
        chunk: int,
        policy: Policy,
    ) -> None:
        self.policy = policy
        #: Volumes in use by a session; shared with the scheduler, which owns it.
        self.volumes_busy: set[str] = set()
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

    # -- recall -----------------------------------------------------------------------

    async def recall(self, drive: DriveState, volume: str) -> None:
        await self.drives.ensure_mounted(drive, volume, "recall")
        budget = self.policy.files_per_session
        order = (Request.position, Request.id) if self.policy.position_order else (Request.id,)
        while budget is None or budget > 0:
            limit = self.chunk if budget is None else min(budget, self.chunk)
            stmt = (
                select(Request)
                .where(
                    Request.kind == Kind.RECALL,
                    Request.state == State.QUEUED,
                    Request.volume == volume,
                )
                .order_by(*order)
                .limit(limit)
            )
            claimed = await self.store.claim(stmt, drive.name)
            if not claimed:
                return
            if budget is not None:
                budget -= len(claimed)
            await self._read_batch(drive, volume, claimed)

    async def _read_batch(self, drive: DriveState, volume: str, claimed: list[Request]) -> None:
        pending = {r.id: r for r in claimed}
        try:
            by_item = await self._read_items(volume, claimed, pending)
            items = list(by_item.values())
            async for result in self.backend.read(drive.name, [i for i, _ in items]):
                request = by_item[id(result.item)][1]
                pending.pop(request.id, None)
                await self._finish_read(drive, request, result)
        finally:
            # Whatever the session did not get to goes back to the queue.
            await self.store.transition(
                list(pending),
                (State.ACTIVE,),
                State.QUEUED,
                reason="session ended",
                values={"drive": None},
            )
            await self.drives.flush_stats(drive)

    async def _read_items(
        self, volume: str, claimed: list[Request], pending: dict[int, Request]
    ) -> dict[int, tuple[ReadItem, Request]]:
        """ReadItems in claim (position) order, keyed by id() of the item."""
        pnfsids = sorted({r.pnfsid for r in claimed if r.pnfsid})
        copies = await self.retrier.call("locate", lambda: self.backend.locate(pnfsids))
        by_item: dict[int, tuple[ReadItem, Request]] = {}
        moved: list[int] = []
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
            await self.store.transition(
                moved,
                (State.ACTIVE,),
                State.QUEUED,
                reason="copy moved",
                values={"volume": None, "position": None, "drive": None},
            )
        return by_item

    async def _finish_read(self, drive: DriveState, request: Request, result: ReadResult) -> None:
        fields = {
            "pnfsid": request.pnfsid,
            "volume": result.item.copy.volume,
            "drive": drive.name,
            "request_id": request.id,
        }
        if result.error is not None:
            await self._fail(request, result.error, **fields)
            return
        if request.checksum and result.adler32 and request.checksum != result.adler32:
            await self._fail(request, _mismatch(request.checksum, result.adler32), **fields)
            return
        self.drives.account(drive, result.nbytes, result.transfer_s, result.locate_s)
        self.metrics.transfer_bytes_total.labels(kind="recall").inc(result.nbytes)
        if await self.store.finish(
            request.id, State.DONE, "recalled", result_adler32=result.adler32, size=result.nbytes
        ):
            self._observe(request, "done")
            log.info("request.done", kind="recall", bytes=result.nbytes, **fields)
        else:
            # Cancelled while on tape: take back the file nobody waits for any more.
            await result.item.sink.retract()
            log.info("recall.retracted", **fields)

    # -- migrate ----------------------------------------------------------------------

    async def migrate(self, drive: DriveState, storage_class: str) -> None:
        stmt = (
            select(Request)
            .where(
                Request.kind == Kind.MIGRATE,
                Request.state == State.QUEUED,
                Request.storage_class == storage_class,
            )
            .order_by(Request.priority.desc(), Request.id)
            .limit(self.chunk)
        )
        claimed = await self.store.claim(stmt, drive.name)
        if not claimed:
            return
        pending = {r.id: r for r in claimed}
        held, volume = drive.volume, None
        try:
            total = sum(r.size or 0 for r in claimed)
            volume = await self.retrier.call(
                "writable_volume", lambda: self.backend.writable_volume(storage_class, total)
            )
            self.filling[storage_class] = volume
            await self._take_volume(drive, volume)
            await self.drives.ensure_mounted(drive, volume, "migrate")
            items = [
                WriteItem(
                    pnfsid=r.pnfsid or "",
                    storage_class=storage_class,
                    source=self.source_for(r),
                    adler32=r.checksum,
                )
                for r in claimed
            ]
            by_item = {id(item): r for item, r in zip(items, claimed, strict=True)}
            async for result in self.backend.write(drive.name, items):
                request = by_item[id(result.item)]
                pending.pop(request.id, None)
                await self._finish_write(drive, request, result)
        finally:
            if volume is not None and volume != held:
                self.volumes_busy.discard(volume)
            await self.store.transition(
                list(pending),
                (State.ACTIVE,),
                State.QUEUED,
                reason="session ended",
                values={"drive": None},
            )
            await self.drives.flush_stats(drive)

    async def _take_volume(self, drive: DriveState, volume: str) -> None:
        """Reserve the filling tape for this drive, fetching it from an idle drive."""
        holder = self.drives.holding(volume)
        if volume != drive.volume and (volume in self.volumes_busy or (holder and holder.busy)):
            raise TransientBackendError(f"volume {volume} is busy in another session")
        self.volumes_busy.add(volume)
        if holder is not None and holder is not drive:
            holder.busy = True
            try:
                await self.drives.dismount(holder)
            finally:
                holder.busy = False

    async def _finish_write(self, drive: DriveState, request: Request, result: WriteResult) -> None:
        fields = {"pnfsid": request.pnfsid, "drive": drive.name, "request_id": request.id}
        if result.error is not None or result.copy is None:
            await self._fail(request, result.error or TssdError("no copy written"), **fields)
            return
        copy = result.copy
        self.drives.account(drive, copy.size, result.transfer_s, 0.0)
        self.metrics.transfer_bytes_total.labels(kind="migrate").inc(copy.size)
        await self.complete_migration(request, copy)

    async def complete_migration(self, request: Request, copy: TapeCopy) -> None:
        uri = make_uri(
            request.hsm_type, request.hsm_instance, request.store, request.group, copy.bfid
        )
        if await self.store.finish(
            request.id,
            State.DONE,
            "migrated",
            uri=uri,
            bfid=copy.bfid,
            volume=copy.volume,
            position=copy.position,
            result_adler32=copy.adler32,
        ):
            self._observe(request, "done")
            log.info(
                "request.done",
                kind="migrate",
                request_id=request.id,
                pnfsid=request.pnfsid,
                volume=copy.volume,
                bfid=copy.bfid,
            )

    # -- shared -----------------------------------------------------------------------

    async def _fail(self, request: Request, exc: BaseException, **fields: Any) -> None:
        if isinstance(exc, TransientBackendError) and self.retrier.another_attempt(
            request.attempts, op=f"{request.kind}_item", error=exc, **fields
        ):
            # Back to the queue (on the same tape): a later session reads it again.
            await self.store.transition(
                [request.id], (State.ACTIVE,), State.QUEUED, reason="transient backend error",
                values={"drive": None, "error": str(exc)},
            )  # fmt: skip
            return
        code = error_code(exc)
        if await self.store.finish(
            request.id, State.FAILED, type(exc).__name__, error=str(exc), error_code=code
        ):
            self._observe(request, "failed")
            log.warning(
                "request.failed", kind=request.kind, error=str(exc), error_code=code, **fields
            )

    def _observe(self, request: Request, outcome: str) -> None:
        self.metrics.requests_total.labels(request.kind, request.queue, outcome).inc()
        created = request.created_at
        if created.tzinfo is None:  # SQLite hands back naive datetimes
            created = created.replace(tzinfo=UTC)
        self.metrics.request_duration.labels(request.kind, request.queue).observe(
            (utcnow() - created).total_seconds()
        )


def _copy_on(copies: Sequence[TapeCopy], volume: str, position: int | None) -> TapeCopy | None:
    on_volume = [c for c in copies if c.volume == volume]
    exact = [c for c in on_volume if c.position == position]
    found = exact or on_volume
    return found[0] if found else None


def _mismatch(expected: str, actual: str) -> ChecksumMismatch:
    return ChecksumMismatch(f"adler32 {actual} does not match the expected {expected}")

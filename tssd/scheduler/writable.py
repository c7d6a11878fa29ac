"""Write sessions: a migration batch onto a tape it fits, and the end of work that can
never succeed.

A migration larger than any cartridge once went back to the queue after every session,
for ever: 93 % CPU, a storm of events, its storage class blocked (issue 17 point 5). Here
such a request fails on its first attempt (``TooLargeForTape``, exit 31), a batch larger
than one tape is cut down until it fits, and a request whose session fails the same way
``backend.max_same_failures`` times in a row ends failed with that error.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from tssd.backends.base import Source, TapeBackend, TapeCopy, WriteItem, WriteResult
from tssd.domain import Kind, Request, State
from tssd.errors import BackendError, DataError, TooLargeForTape, TransientBackendError, TssdError
from tssd.metrics import Metrics
from tssd.ports.scheduling import SessionLedger
from tssd.retry import Retrier
from tssd.scheduler.drive_session import DriveSessions
from tssd.scheduler.drives import DriveManager, DriveState
from tssd.submit import make_uri

log = structlog.get_logger()


class WritableBatches:
    """Mixin of :class:`~tssd.scheduler.sessions.SessionRunner`: its write sessions."""

    backend: TapeBackend
    retrier: Retrier
    store: SessionLedger
    drives: DriveManager
    metrics: Metrics
    sessions: DriveSessions
    source_for: Callable[[Request], Source]
    filling: dict[str, str]
    paused: frozenset[str]
    chunk: int

    def _observe(self, request: Request, outcome: State) -> None:
        raise NotImplementedError  # SessionRunner's

    async def _fail(self, request: Request, exc: BaseException, **fields: Any) -> None:
        raise NotImplementedError  # SessionRunner's

    async def migrate(
        self,
        drive: DriveState,
        storage_class: str,
        make_room: Callable[[str], Awaitable[None]],
    ) -> None:
        """Write a batch of *storage_class*'s queued migrations to a volume it may fill.

        Once the volume is known, ``make_room(volume)`` unloads any other tape in *drive*
        (the scheduler frees that tape for other drives).
        """
        claimed = await self.store.scheduling.claim_migrations(
            storage_class, drive.name, self.chunk, paused=self.paused
        )
        if not claimed:
            return
        pending = {r.id: r for r in claimed}
        held, volume = drive.volume, None
        try:
            claimed = await self._possible(claimed, pending)
            volume, claimed = await self._volume_for(storage_class, claimed, pending)
            if volume is None:
                return
            self.filling[storage_class] = volume
            await self._take_volume(drive, volume)
            await make_room(volume)
            await self.drives.ensure_mounted(drive, volume, Kind.MIGRATE)
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
        except TssdError as exc:
            if not isinstance(exc, TransientBackendError):
                await self._strike(pending, exc)
            raise
        finally:
            if volume is not None and volume != held:
                self.sessions.of(drive.name).release_volume(volume)
            await self.store.requeue(list(pending), "session ended")
            await self.drives.flush_stats(drive)

    async def _take_volume(self, drive: DriveState, volume: str) -> None:
        """Reserve the filling tape for this drive, fetching it from an idle drive."""
        holder = self.drives.holding(volume)
        reservations = self.sessions.reservations
        busy = reservations.volume_busy(volume) or (holder is not None and holder.busy)
        if volume != drive.volume and busy:
            raise TransientBackendError(f"volume {volume} is busy in another session")
        self.sessions.of(drive.name).reserve_volume(volume)
        if holder is not None and holder is not drive:
            self.drives.occupy(holder)
            try:
                await self.drives.dismount(holder)
            finally:
                self.drives.vacate(holder)

    async def _finish_write(self, drive: DriveState, request: Request, result: WriteResult) -> None:
        fields = {"pnfsid": request.pnfsid, "drive": drive.name, "request_id": request.id}
        if result.error is not None or result.copy is None:
            error = result.error or TssdError("no copy written")
            await self.drives.failed(drive, drive.volume, error, "write")
            await self._fail(request, error, **fields)
            return
        copy = result.copy
        self.drives.succeeded(drive, drive.volume)
        self.drives.account(drive, copy.size, result.transfer_s, 0.0)
        self.metrics.transfer_bytes_total.labels(kind="migrate").inc(copy.size)
        await self.complete_migration(request, copy)

    async def complete_migration(self, request: Request, copy: TapeCopy) -> None:
        uri = make_uri(
            request.hsm_type, request.hsm_instance, request.store, request.group, copy.bfid
        )
        if await self.store.finish(
            request.id,
            "migrated",
            uri=uri,
            bfid=copy.bfid,
            volume=copy.volume,
            position=copy.position,
            result_adler32=copy.adler32,
        ):
            self._observe(request, State.DONE)
            log.info(
                "request.done",
                kind="migrate",
                request_id=request.id,
                pnfsid=request.pnfsid,
                volume=copy.volume,
                bfid=copy.bfid,
            )

    async def _possible(self, claimed: list[Request], pending: dict[int, Request]) -> list[Request]:
        """Fail at once, without a retry, the migrations larger than any tape."""
        largest = await self.retrier.call("max_object_size", self.backend.max_object_size)
        if largest is None:
            return claimed
        possible = []
        for request in claimed:
            if (request.size or 0) <= largest:
                possible.append(request)
                continue
            pending.pop(request.id, None)
            error = TooLargeForTape(
                f"{request.size} bytes: no tape of the library holds more than {largest}"
            )
            await self._fail(request, error, pnfsid=request.pnfsid, request_id=request.id)
        return possible

    async def _volume_for(
        self, storage_class: str, batch: list[Request], pending: dict[int, Request]
    ) -> tuple[str | None, list[Request]]:
        """The volume for *batch*, cut down (halved) until it fits on one tape.

        The requests cut off stay in *pending* and go back to the queue; a single request
        no tape can take fails (the backend knew no largest object size beforehand).
        """
        writable = self.backend.writable_volume
        while batch:
            total = sum(r.size or 0 for r in batch)
            try:
                volume = await self.retrier.call(
                    "writable_volume", functools.partial(writable, storage_class, total)
                )
                return volume, batch
            except TooLargeForTape as exc:
                if len(batch) > 1:
                    batch = batch[: len(batch) // 2]
                    continue
                pending.pop(batch[0].id, None)
                await self._fail(batch[0], exc, pnfsid=batch[0].pnfsid, request_id=batch[0].id)
                batch = []
        return None, []

    async def _strike(self, pending: dict[int, Request], exc: TssdError) -> list[Request]:
        """Fail the requests whose sessions failed the same way ``same_failures`` times.

        A session-level error gives the batch back to the queue, and the next pass would
        take it straight back: without this bound, for ever (issue 17 point 5).
        """
        ended: list[Request] = []
        if not isinstance(exc, BackendError | DataError):
            # A cartridge in another instance's drive, a shutdown, a database away: the
            # daemon's or the cluster's state, not the request's; they pass by themselves.
            return ended
        for request in list(pending.values()):
            if self.retrier.give_up(request.id, exc):
                ended.append(request)
                pending.pop(request.id, None)
                log.warning("request.gave_up", request_id=request.id, pnfsid=request.pnfsid,
                            times=self.retrier.policy.same_failures, error=str(exc))  # fmt: skip
                await self._fail(request, exc, pnfsid=request.pnfsid, request_id=request.id)
        return ended

"""Migration batches a tape can take, and the end of work that can never succeed.

A migration larger than any cartridge once went back to the queue after every session,
for ever: 93 % CPU, a storm of events, its storage class blocked (issue 17 point 5). Here
such a request fails on its first attempt (``TooLargeForTape``, exit 31), a batch larger
than one tape is cut down until it fits, and a request whose session fails the same way
``backend.max_same_failures`` times in a row ends failed with that error.
"""

from __future__ import annotations

import functools
from typing import Any

import structlog

from tssd.backends.base import TapeBackend
from tssd.db.models import Request
from tssd.errors import BackendError, DataError, TooLargeForTape, TssdError
from tssd.retry import Retrier

log = structlog.get_logger()


class WritableBatches:
    """Mixin of :class:`~tssd.scheduler.sessions.SessionRunner`: what a write session may try."""

    backend: TapeBackend
    retrier: Retrier

    async def _fail(self, request: Request, exc: BaseException, **fields: Any) -> None:
        raise NotImplementedError  # SessionRunner's

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

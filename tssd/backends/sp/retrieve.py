"""A recall through the API: ``dsmBeginGetData`` on the objects in the order given, in
calls of at most ``DSM_MAX_GET_OBJ``, each object's bytes into its sink, the checksum
compared before the sink commits.

The next buffer is fetched on the session's thread while the sink writes the last one
(the sink's own worker thread), so the disk and the server work at the same time; the
adler32 is computed on the session's thread too, off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import structlog

from tssd.backends.base import ReadItem, ReadResult
from tssd.backends.records import normalize_adler32
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.catalog import SpCatalog
from tssd.backends.sp.client import Session
from tssd.backends.sp.naming import object_id_of
from tssd.backends.sp.sessions import SpSession, lost
from tssd.errors import (
    BackendError,
    ChecksumMismatch,
    DataError,
    InvalidRequest,
    ObjectNotFound,
    TssdError,
)
from tssd.files import adler32_hex

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Chunk:
    data: bytes
    done: bool
    adler: int


def _first(session: Session, object_id: int) -> Chunk:
    data, done = session.get_object(object_id)
    return Chunk(data, done, zlib.adler32(data))


def _next(session: Session, adler: int) -> Chunk:
    data, done = session.get_data()
    return Chunk(data, done, zlib.adler32(data, adler))


class Retrieval:
    """The reads of one :meth:`SpLibrary.read` call on one session."""

    def __init__(
        self, session: SpSession, drive: str, mount_wait: bool, catalog: SpCatalog
    ) -> None:
        self._session = session
        self._drive = drive
        self._mount_wait = mount_wait
        self._catalog = catalog

    async def run(self, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        wanted: list[tuple[ReadItem, int]] = []
        for item in items:
            try:
                wanted.append((item, object_id_of(item.copy.bfid)))
            except InvalidRequest as exc:
                await item.sink.abort()
                yield self._failed(item, ObjectNotFound(str(exc)))
        for start in range(0, len(wanted), c.DSM_MAX_GET_OBJ):
            async for result in self._batch(wanted[start : start + c.DSM_MAX_GET_OBJ]):
                yield result

    async def _begin(self, batch: list[tuple[ReadItem, int]]) -> list[tuple[ReadItem, int]]:
        ids = [object_id for _, object_id in batch]
        what = f"retrieve of {len(ids)} objects on {batch[0][0].copy.volume}"
        await self._session.run(what, lambda s: s.begin_get(ids, self._mount_wait))
        return batch

    async def _present(
        self, batch: list[tuple[ReadItem, int]]
    ) -> tuple[list[tuple[ReadItem, int]], list[tuple[ReadItem, int]]]:
        """The server refused the list for an object it lacks: which ones are still there."""
        there: list[tuple[ReadItem, int]] = []
        gone: list[tuple[ReadItem, int]] = []
        for item, object_id in batch:
            copies = await self._catalog.copies_of(item.copy.pnfsid)
            (there if any(c.bfid == item.copy.bfid for c in copies) else gone).append(
                (item, object_id)
            )
        return there, gone

    async def _batch(self, batch: list[tuple[ReadItem, int]]) -> AsyncIterator[ReadResult]:
        try:
            await self._begin(batch)
        except ObjectNotFound:
            batch, gone = await self._present(batch)
            for item, object_id in gone:
                await item.sink.abort()
                yield self._failed(item, ObjectNotFound(f"no object {object_id} on the server"))
            if not batch:
                return
            await self._begin(batch)
        try:
            for item, object_id in batch:
                yield await self._one(item, object_id)
        finally:
            if self._session.signed_on:
                try:
                    await self._session.run("end of retrieve", Session.end_get)
                except BackendError as exc:
                    log.warning("sp.read.end_failed", drive=self._drive, error=str(exc))

    async def _one(self, item: ReadItem, object_id: int) -> ReadResult:
        try:
            return await self._guarded(item, object_id)
        except BaseException:
            await item.sink.abort()
            raise

    async def _guarded(self, item: ReadItem, object_id: int) -> ReadResult:
        copy = item.copy
        started = time.monotonic()
        try:
            chunk = await self._session.run(
                f"retrieve of {copy.pnfsid}", lambda s: _first(s, object_id)
            )
        except BackendError as exc:
            if lost(exc):
                raise
            await item.sink.abort()
            return self._failed(item, exc)
        located = time.monotonic() - started
        try:
            nbytes, adler = await self._stream(item, chunk)
        except (BackendError, DataError) as exc:
            if isinstance(exc, BackendError) and lost(exc):
                raise
            await item.sink.abort()
            await self._end_object()
            return self._failed(item, exc)
        await self._end_object()
        expected = normalize_adler32(copy.adler32)
        if nbytes != copy.size or (expected is not None and adler != expected):
            await item.sink.abort()
            error = ChecksumMismatch(
                f"{copy.pnfsid}: read {nbytes} bytes with adler32 {adler}, the catalog "
                f"has {copy.size} bytes with {expected}"
            )
            return self._failed(item, error)
        try:
            committed, _ = await item.sink.commit()
        except DataError as exc:
            await item.sink.abort()
            return self._failed(item, exc)
        transfer = time.monotonic() - started - located
        log.debug("sp.read.file", drive=self._drive, pnfsid=copy.pnfsid, nbytes=committed)
        return ReadResult(item, committed, adler, locate_s=located, transfer_s=transfer)

    async def _stream(self, item: ReadItem, chunk: Chunk) -> tuple[int, str]:
        nbytes = 0
        while not chunk.done:
            # Fetch the next buffer while the sink writes this one.
            fetch = asyncio.ensure_future(
                self._session.run(
                    f"retrieve of {item.copy.pnfsid}", functools.partial(_next, adler=chunk.adler)
                )
            )
            try:
                await item.sink.write(chunk.data)
            except BaseException:
                await asyncio.gather(fetch, return_exceptions=True)
                raise
            nbytes += len(chunk.data)
            chunk = await fetch
        await item.sink.write(chunk.data)
        return nbytes + len(chunk.data), adler32_hex(chunk.adler)

    async def _end_object(self) -> None:
        if self._session.signed_on:
            try:
                await self._session.run("end of object", Session.end_get_object)
            except BackendError as exc:
                if lost(exc):
                    raise
                log.warning("sp.read.end_failed", drive=self._drive, error=str(exc))

    def _failed(self, item: ReadItem, error: TssdError) -> ReadResult:
        log.warning(
            "sp.read.failed",
            drive=self._drive,
            volume=item.copy.volume,
            pnfsid=item.copy.pnfsid,
            error=str(error),
            error_type=type(error).__name__,
        )
        return ReadResult(item, error=error)

"""A migration through the API: one transaction per object (``dsmBeginTxn``,
``dsmBindMC``, ``dsmSendObj(stArchive)``, ``dsmSendData``..., ``dsmEndSendObjEx``,
``dsmEndTxnEx``), committed only when the bytes sent have the checksum expected.

Idempotent as the contract asks: a pnfsid already archived with the same size and adler32
answers that copy, looked up before sending and again before the vote, so a put retried
after a crash (tssd killed between send and commit: the server drops the open
transaction; or after the commit, before tssd recorded it) never leaves a second copy.
"""

from __future__ import annotations

import asyncio
import time
import zlib

import structlog

from tssd.backends.base import TapeCopy, WriteItem, WriteResult
from tssd.backends.records import normalize_adler32
from tssd.backends.sp.catalog import SpCatalog
from tssd.backends.sp.client import Session
from tssd.backends.sp.naming import encode_objinfo, object_id_of, object_name
from tssd.backends.sp.sessions import SpSession
from tssd.errors import (
    BackendError,
    ChecksumMismatch,
    DataError,
    PermanentBackendError,
    SourceUnreadable,
    TssdError,
)
from tssd.files import adler32_hex

log = structlog.get_logger()


async def source_adler32(item: WriteItem) -> str:
    """The source's adler32, read once before sending when the client gave none."""
    value, nbytes = 1, 0
    async for data in item.source.chunks():
        value = await asyncio.to_thread(zlib.adler32, data, value)
        nbytes += len(data)
    if nbytes != item.source.size:
        raise SourceUnreadable(f"{item.pnfsid}: read {nbytes} bytes, expected {item.source.size}")
    return adler32_hex(value)


class Archiving:
    """The writes of one :meth:`SpLibrary.write` call on one session."""

    def __init__(
        self,
        session: SpSession,
        catalog: SpCatalog,
        drive: str,
        filespace: str,
        management_class: dict[str, str],
        default_class: str,
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._drive = drive
        self._filespace = filespace
        self._classes = management_class
        self._default = default_class

    def management_class(self, storage_class: str) -> str:
        return self._classes.get(storage_class, self._default)

    async def one(self, item: WriteItem) -> WriteResult:
        started = time.monotonic()
        try:
            expected = normalize_adler32(item.adler32) or await source_adler32(item)
            existing = await self._catalog.find_copy(item.pnfsid, item.source.size, expected)
            if existing is not None:
                return self._exists(item, existing)
            copy = await self._send(item, expected)
        except (BackendError, DataError) as exc:
            return self._failed(item, exc)
        log.debug("sp.write.file", drive=self._drive, pnfsid=item.pnfsid, bfid=copy.bfid)
        return WriteResult(item, copy=copy, transfer_s=time.monotonic() - started)

    async def _send(self, item: WriteItem, expected: str) -> TapeCopy:
        size = item.source.size
        name = object_name(self._filespace, item.storage_class, item.pnfsid)
        mc = self.management_class(item.storage_class)
        info = encode_objinfo(size, expected)
        what = f"archive of {item.pnfsid}"
        await self._session.run(what, lambda s: s.begin_send(name, mc, size, info))
        committed = False
        try:
            value, nbytes = 1, 0
            async for data in item.source.chunks():
                value = zlib.adler32(data, value)
                nbytes += len(data)
                await self._session.run(what, lambda s, d=data: s.send_data(d))  # type: ignore[misc]
            adler = adler32_hex(value)
            if nbytes != size:
                raise SourceUnreadable(f"{item.pnfsid}: read {nbytes} bytes, expected {size}")
            if adler != expected:
                raise ChecksumMismatch(
                    f"{item.pnfsid}: source adler32 {adler}, expected {expected}"
                )
            # Another writer (a retry racing its original) may have committed meanwhile.
            existing = await self._catalog.find_copy(item.pnfsid, size, adler)
            if existing is not None:
                return existing
            await self._session.run(what, lambda s: s.end_send(vote_commit=True))
            committed = True
        finally:
            if not committed and self._session.signed_on:
                await self._session.run(what, Session.abort_txn)
        return await self._written(item, size, expected)

    async def _written(self, item: WriteItem, size: int, adler: str) -> TapeCopy:
        """The copy just committed, as the server's catalog now has it."""
        copies = await self._catalog.copies_of(item.pnfsid, item.storage_class)
        matching = [c for c in copies if c.size == size and c.adler32 == adler]
        if not matching:
            raise PermanentBackendError(
                f"{item.pnfsid}: committed, yet the server's catalog has no such copy"
            )
        return max(matching, key=lambda c: object_id_of(c.bfid))

    def _exists(self, item: WriteItem, copy: TapeCopy) -> WriteResult:
        log.info(
            "sp.write.exists",
            drive=self._drive,
            volume=copy.volume,
            pnfsid=item.pnfsid,
            bfid=copy.bfid,
        )
        return WriteResult(item, copy=copy)

    def _failed(self, item: WriteItem, error: TssdError) -> WriteResult:
        log.warning(
            "sp.write.failed",
            drive=self._drive,
            pnfsid=item.pnfsid,
            error=str(error),
            error_type=type(error).__name__,
        )
        return WriteResult(item, error=error)

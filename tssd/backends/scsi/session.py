"""One object read or written inside a mounted tape's session, with its outcome.

A failure of one object (media error, checksum, a pool disk error, an unreadable source)
becomes the error of its result and the session goes on; errors of the drive itself
(not ready, end of medium, write protect) are raised to end the session.
"""

from __future__ import annotations

import dataclasses

import structlog

from tssd.backends.base import ReadItem, ReadResult, WriteItem, WriteResult
from tssd.backends.catalog import StoredObject
from tssd.backends.records import normalize_adler32
from tssd.backends.scsi.catalog import Catalog
from tssd.backends.scsi.format import ObjectHeader
from tssd.backends.scsi.objects import read_object, source_adler32, write_object
from tssd.backends.scsi.tapedev import MediaError, Tape
from tssd.clock import Clock
from tssd.errors import ChecksumMismatch, DataError, ObjectNotFound, PermanentBackendError

log = structlog.get_logger()


async def read_one(
    tape: Tape,
    drive: str,
    obj: StoredObject | None,
    item: ReadItem,
    block_size: int,
    clock: Clock,
) -> ReadResult:
    """Locate, read, verify and commit one object; the sink never keeps partial data."""
    committed = False
    try:
        if obj is None or obj.volume != item.copy.volume:
            error = ObjectNotFound(f"no object {item.copy.bfid} on {item.copy.volume}")
            return _read_failed(drive, item, error)
        started = clock.now()
        try:
            await tape.position(obj.block, obj.seq)
            located = clock.now()
            # scsi_objects.adler32 is never null: the library writes it with the object.
            checksum = obj.adler32 or ""
            expected = ObjectHeader(obj.bfid, obj.pnfsid, obj.size, checksum, "", "", obj.seq)
            nbytes, adler = await read_object(tape, obj.block, expected, item.sink, block_size)
            if adler != normalize_adler32(obj.adler32):
                raise ChecksumMismatch(
                    f"{obj.pnfsid} on {obj.volume}: read adler32 {adler}, catalog {obj.adler32}"
                )
            await item.sink.commit()
            committed = True
        except (DataError, PermanentBackendError) as exc:
            return _read_failed(drive, item, exc)
        finished = clock.now()
        log.debug(
            "scsi.read.file", drive=drive, volume=obj.volume, pnfsid=obj.pnfsid, block=obj.block
        )
        return ReadResult(
            item, nbytes, adler, locate_s=located - started, transfer_s=finished - located
        )
    finally:
        if not committed:
            await item.sink.abort()


def _read_failed(drive: str, item: ReadItem, error: Exception) -> ReadResult:
    log.warning(
        "scsi.read.failed",
        drive=drive,
        volume=item.copy.volume,
        pnfsid=item.copy.pnfsid,
        error=str(error),
        error_type=type(error).__name__,
        media=isinstance(error, MediaError),
    )
    return ReadResult(item, error=error)


async def write_one(
    tape: Tape,
    volume: str,
    block: int,
    header: ObjectHeader,
    item: WriteItem,
    catalog: Catalog,
    block_size: int,
    clock: Clock,
) -> WriteResult:
    """Append one object at *block* (the end of data) and record it once it is on tape.

    An object already on tape with the same bytes is returned instead. A rejected object
    (bad checksum, unreadable source) is not recorded: the next one overwrites it.
    """
    size = item.source.size
    try:
        if not header.adler32:
            # The header carries the checksum, so without one from the client read twice.
            header = dataclasses.replace(header, adler32=await source_adler32(item.source))
        existing = await catalog.find_copy(item.pnfsid, size, header.adler32)
        if existing is not None:
            log.info("scsi.write.exists", volume=existing.volume, pnfsid=item.pnfsid)
            return WriteResult(item, copy=existing)
        started = clock.now()
        written = await write_object(tape, block, header, item.source, block_size)
    except DataError as exc:
        return _write_failed(volume, item, exc)
    if written.adler32 != header.adler32:
        error = ChecksumMismatch(
            f"{item.pnfsid}: source adler32 {written.adler32}, expected {header.adler32}"
        )
        return _write_failed(volume, item, error)
    copy = await catalog.record(
        volume,
        bfid=header.bfid,
        pnfsid=item.pnfsid,
        storage_class=item.storage_class,
        size=written.size,
        adler32=written.adler32,
        written_at=clock.wall(),
        block=block,
        blocks=written.blocks,
    )
    log.debug("scsi.write.file", volume=volume, pnfsid=item.pnfsid, bfid=copy.bfid, block=block)
    return WriteResult(item, copy=copy, transfer_s=clock.now() - started)


def _write_failed(volume: str, item: WriteItem, error: Exception) -> WriteResult:
    log.warning(
        "scsi.write.failed",
        volume=volume,
        pnfsid=item.pnfsid,
        error=str(error),
        error_type=type(error).__name__,
    )
    return WriteResult(item, error=error)

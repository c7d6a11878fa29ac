"""Objects on an open tape in tssd's format (:mod:`.format`): label, write and read.

Functions here move bytes between a :class:`~tssd.backends.scsi.tapedev.Tape` and a
source or sink; choosing tapes and keeping the catalog is the library's job.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass

from tssd.backends.base import Sink, Source
from tssd.backends.scsi.format import (
    FIRST_OBJECT_BLOCK,
    FormatError,
    ObjectHeader,
    VolumeLabel,
    data_blocks,
    pack_header,
    pack_label,
    unpack_header,
    unpack_label,
)
from tssd.backends.scsi.tapedev import MediaError, Tape
from tssd.errors import PermanentBackendError, SourceUnreadable
from tssd.files import adler32_hex

#: Blocks moved per worker-thread hop (4 MiB at 256 KiB blocks).
BATCH_BLOCKS = 16


@dataclass(frozen=True, slots=True)
class Written:
    block: int
    blocks: int
    size: int
    adler32: str


async def write_label(tape: Tape, label: VolumeLabel) -> int:
    """Label a tape from its beginning; return the block id of the first object."""
    await tape.rewind()
    await tape.write_block(pack_label(label))
    await tape.write_filemark()
    return FIRST_OBJECT_BLOCK


async def read_label(tape: Tape, block_size: int) -> VolumeLabel | None:
    """The tape's label, or None for a blank tape or one in another format."""
    await tape.rewind()
    try:
        block = await tape.read_block(max(block_size, 1 << 20))
        return unpack_label(block)
    except (MediaError, FormatError):
        return None
    finally:
        await tape.rewind()


async def source_adler32(source: Source) -> str:
    """A pre-pass over the source when the client gave no checksum for the header."""
    adler = zlib.adler32(b"")
    async for data in source.chunks():
        adler = zlib.adler32(data, adler)
    return adler32_hex(adler)


async def write_object(
    tape: Tape, block: int, header: ObjectHeader, source: Source, block_size: int
) -> Written:
    """Header, data, filemark at *block*; the adler32 of what was read from the source.

    The caller checks the checksum against the header's before recording the object; a
    rejected object is simply overwritten by the next one written at *block*.
    """
    await tape.position(block, header.seq)
    await tape.write_block(pack_header(header, block_size))
    adler, size = zlib.adler32(b""), 0
    pending, batch = bytearray(), []
    async for data in source.chunks():
        adler = zlib.adler32(data, adler)
        size += len(data)
        pending += data
        if len(pending) < block_size:
            continue
        full = len(pending) - len(pending) % block_size
        batch += [bytes(pending[i : i + block_size]) for i in range(0, full, block_size)]
        del pending[:full]
        if len(batch) >= BATCH_BLOCKS:
            await tape.write_blocks(batch)
            batch = []
    if pending:
        batch.append(bytes(pending.ljust(block_size, b"\0")))
    if batch:
        await tape.write_blocks(batch)
    if size != source.size:
        raise SourceUnreadable(f"{header.pnfsid}: read {size} bytes, expected {source.size}")
    await tape.write_filemark()
    return Written(block, 2 + data_blocks(size, block_size), size, adler32_hex(adler))


async def read_object(
    tape: Tape, block: int, expected: ObjectHeader, sink: Sink, block_size: int
) -> tuple[int, str]:
    """Check the header at the position (*block*), stream the data into *sink*;
    return (bytes, adler32).

    The caller has located to *block*. The sink is neither committed nor aborted here. A
    header that is not the expected object (overwritten, wrong tape) or a missing
    filemark is a permanent error.
    """
    try:
        header = unpack_header(await tape.read_block(block_size))
    except FormatError as exc:
        raise PermanentBackendError(f"block {block} holds no object header: {exc}") from exc
    if (header.bfid, header.size) != (expected.bfid, expected.size):
        raise PermanentBackendError(
            f"block {block} holds {header.bfid} ({header.size} bytes), not {expected.bfid}"
        )
    remaining, adler = header.size, zlib.adler32(b"")
    todo = data_blocks(header.size, block_size)
    while todo:
        count = min(todo, BATCH_BLOCKS)
        for data in await tape.read_blocks(count, block_size):
            if len(data) != block_size:
                raise MediaError(f"short block ({len(data)} bytes) in {header.bfid}")
            piece = data[: min(remaining, block_size)]
            remaining -= len(piece)
            adler = zlib.adler32(piece, adler)
            await sink.write(piece)
        todo -= count
        await asyncio.sleep(0)  # a sink that never suspends must not starve the loop
    if await tape.read_block(block_size) != b"":
        raise PermanentBackendError(f"no filemark after {header.bfid} at block {block}")
    return header.size, adler32_hex(adler)

"""The simulated library's drives and what comes off its "tape": the object store's
bytes, or filler for imported objects that have none, checked against the catalog."""

from __future__ import annotations

import asyncio
import hashlib
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tssd.backends.base import Sink
from tssd.backends.catalog import StoredObject
from tssd.backends.records import normalize_adler32
from tssd.errors import ChecksumMismatch, PermanentBackendError, SourceUnreadable
from tssd.files import CHUNK_SIZE, CountingSink, FileSource, adler32_hex


@dataclass(slots=True)
class SimDrive:
    name: str
    volume: str | None = None
    capacity: int = 0
    #: Byte offset of the head on the loaded volume.
    head: int = 0
    #: Bytes transferred during this mount while every transfer followed the one before
    #: from BOT (the head never located elsewhere); None once it did: what the rewind
    #: on unload depends on (``Profile.unload_rewind_s``).
    contiguous: int | None = 0

    def move(self, start: int, end: int) -> None:
        """The head locates from where it is to *start* and reads or writes to *end*."""
        if self.contiguous is not None:
            self.contiguous = end if start == self.head else None
        self.head = end


def filler_chunks(pnfsid: str, size: int) -> AsyncIterator[bytes]:
    """Deterministic stand-in bytes for catalog imports that carry no data."""
    pattern = hashlib.sha256(pnfsid.encode()).digest()
    block = pattern * (CHUNK_SIZE // len(pattern))

    async def generate() -> AsyncIterator[bytes]:
        remaining = size
        while remaining > 0:
            n = min(remaining, CHUNK_SIZE)
            yield block if n == CHUNK_SIZE else block[:n]
            remaining -= n

    return generate()


async def deliver(objects: Path, obj: StoredObject, sink: Sink) -> tuple[int, str]:
    """Stream, verify and commit one object; the sink is aborted on any failure."""
    committed = False
    try:
        actual = await copy_out(objects, obj, sink)
        expected = normalize_adler32(obj.adler32) if obj.has_data else None
        if expected is not None and actual != expected:
            raise ChecksumMismatch(
                f"{obj.pnfsid} on {obj.volume}: read adler32 {actual}, catalog {expected}"
            )
        result = await sink.commit()
        committed = True
        return result
    finally:
        if not committed:
            await sink.abort()


async def copy_out(objects: Path, obj: StoredObject, sink: Sink) -> str | None:
    """Stream the object into *sink*; return its adler32 when it has real bytes.

    Imported objects have no bytes and their catalog checksum describes data we do
    not hold, so they are streamed as filler and not verified.
    """
    if not obj.has_data and isinstance(sink, CountingSink):
        # Simulation: terabytes of filler would only be counted, so count them.
        sink.account(obj.size)
        return None
    if obj.has_data:
        source = FileSource(objects / obj.bfid, obj.size).chunks()
    else:
        source = filler_chunks(obj.pnfsid, obj.size)
    adler = zlib.adler32(b"")
    try:
        async for data in source:
            if obj.has_data:
                adler = zlib.adler32(data, adler)
            await sink.write(data)
            # A sink that never suspends (CountingSink) must not starve the loop.
            await asyncio.sleep(0)
    except SourceUnreadable as exc:
        # The library's own store is the "tape": losing it is a media error.
        raise PermanentBackendError(f"media error reading {obj.bfid}: {exc}") from exc
    return adler32_hex(adler) if obj.has_data else None

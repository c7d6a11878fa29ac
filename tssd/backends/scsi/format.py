"""tssd's on-tape format.

A tape is a sequence of fixed-size blocks (``scsi.block_size``) and filemarks::

    block 0      volume label  (magic TSSDVOL1, volume, block size, time, format version)
    block 1      filemark
    per object:  header block  (magic TSSDOBJ1, bfid, pnfsid, size, adler32, written time,
                                storage class, sequence number)
                 ceil(size / block_size) data blocks, the last one padded with zeros
                 filemark

Block ids are the drive's logical object ids (``MTIOCPOS``): data blocks and filemarks
both count, so the header of the first object is block 2. The catalog records the block
id of each header at write time and a read locates there (``MTSEEK``); object *n* is also
tape file *n*, which is how a drive without LOCATE gets there (spacing filemarks). Label and header
are one block each: an eight-byte magic, a four-byte big-endian length, a UTF-8 JSON
document, zero padding. Anyone can read a tape back with ``dd`` and a few lines of code.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from typing import Any

FORMAT_VERSION = 1
VOLUME_MAGIC = b"TSSDVOL1"
OBJECT_MAGIC = b"TSSDOBJ1"
_LENGTH = struct.Struct(">I")
_PREFIX = len(VOLUME_MAGIC) + _LENGTH.size
#: Block id of the first object header: label block, then its filemark.
FIRST_OBJECT_BLOCK = 2
#: Smallest block that holds a label or header with long names.
MIN_BLOCK_SIZE = 4096


class FormatError(ValueError):
    """A block is not the label or header this format expects."""


@dataclass(frozen=True, slots=True)
class VolumeLabel:
    volume: str
    block_size: int
    written_at: str
    format: int = FORMAT_VERSION


@dataclass(frozen=True, slots=True)
class ObjectHeader:
    bfid: str
    pnfsid: str
    size: int
    adler32: str
    written_at: str
    storage_class: str
    seq: int


def data_blocks(size: int, block_size: int) -> int:
    """Blocks the data of a *size*-byte object takes."""
    return -(-size // block_size)


def object_blocks(size: int, block_size: int) -> int:
    """Logical objects one stored object takes: header, data blocks, filemark."""
    return 1 + data_blocks(size, block_size) + 1


def _pack(magic: bytes, doc: dict[str, Any], block_size: int) -> bytes:
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    if _PREFIX + len(body) > block_size:
        raise FormatError(f"{magic.decode()} block needs {_PREFIX + len(body)} bytes")
    return (magic + _LENGTH.pack(len(body)) + body).ljust(block_size, b"\0")


def _unpack(magic: bytes, block: bytes) -> dict[str, Any]:
    if not block.startswith(magic):
        raise FormatError(f"not a {magic.decode()} block: starts {block[:8]!r}")
    (length,) = _LENGTH.unpack_from(block, len(magic))
    try:
        doc = json.loads(block[_PREFIX : _PREFIX + length])
    except ValueError as exc:
        raise FormatError(f"damaged {magic.decode()} block: {exc}") from exc
    if not isinstance(doc, dict):
        raise FormatError(f"damaged {magic.decode()} block")
    return doc


def pack_label(label: VolumeLabel) -> bytes:
    return _pack(VOLUME_MAGIC, asdict(label), label.block_size)


def unpack_label(block: bytes) -> VolumeLabel:
    doc = _unpack(VOLUME_MAGIC, block)
    try:
        return VolumeLabel(**doc)
    except TypeError as exc:
        raise FormatError(f"volume label has unexpected fields: {sorted(doc)}") from exc


def pack_header(header: ObjectHeader, block_size: int) -> bytes:
    return _pack(OBJECT_MAGIC, asdict(header), block_size)


def unpack_header(block: bytes) -> ObjectHeader:
    doc = _unpack(OBJECT_MAGIC, block)
    try:
        return ObjectHeader(**doc)
    except TypeError as exc:
        raise FormatError(f"object header has unexpected fields: {sorted(doc)}") from exc

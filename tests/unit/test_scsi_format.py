"""tssd's on-tape format: label and header blocks, block arithmetic."""

from __future__ import annotations

import pytest

from tssd.backends.scsi.format import (
    FormatError,
    ObjectHeader,
    VolumeLabel,
    data_blocks,
    object_blocks,
    pack_header,
    pack_label,
    unpack_header,
    unpack_label,
)

HEADER = ObjectHeader(
    bfid="ab" * 16,
    pnfsid="0000" + "F" * 32,
    size=12345,
    adler32="0a1b2c3d",
    written_at="2026-11-29T10:00:00+00:00",
    storage_class="atlas:tape",
    seq=7,
)


def test_label_round_trip() -> None:
    label = VolumeLabel("E01001L8", 4096, "2026-11-29T10:00:00+00:00")
    block = pack_label(label)
    assert len(block) == 4096
    assert block.startswith(b"TSSDVOL1")
    assert unpack_label(block) == label


def test_header_round_trip() -> None:
    block = pack_header(HEADER, 8192)
    assert len(block) == 8192
    assert unpack_header(block) == HEADER


def test_wrong_block_kind_is_refused() -> None:
    with pytest.raises(FormatError):
        unpack_label(pack_header(HEADER, 4096))
    with pytest.raises(FormatError):
        unpack_header(b"\0" * 4096)
    with pytest.raises(FormatError):
        unpack_header(b"TSSDOBJ1\x00\x00\x00\x05{bad" + b"\0" * 100)


def test_header_too_big_for_block() -> None:
    with pytest.raises(FormatError):
        pack_header(HEADER, 64)


@pytest.mark.parametrize(("size", "blocks"), [(0, 0), (1, 1), (4096, 1), (4097, 2), (3 * 4096, 3)])
def test_block_counts(size: int, blocks: int) -> None:
    assert data_blocks(size, 4096) == blocks
    assert object_blocks(size, 4096) == blocks + 2

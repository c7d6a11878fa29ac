"""FileSink, FileSource and CountingSink: atomic delivery, cleanup, error mapping."""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

import pytest

from tssd.errors import DestinationUnwritable, NoSpace, SourceUnreadable
from tssd.files import CHUNK_SIZE, CountingSink, FileSink, FileSource


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data):08x}"


async def test_sink_writes_hidden_temp_then_renames(tmp_path: Path) -> None:
    dest = tmp_path / "0000ABCD"
    sink = FileSink(dest)
    await sink.write(b"hello ")
    await sink.write(b"tape")
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".0000ABCD.tssd-part"]
    assert await sink.commit() == (10, adler(b"hello tape"))
    assert [p.name for p in tmp_path.iterdir()] == ["0000ABCD"]
    assert dest.read_bytes() == b"hello tape"


async def test_sink_commit_of_nothing_creates_empty_file(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "empty")
    assert await sink.commit() == (0, "00000001")
    assert (tmp_path / "empty").read_bytes() == b""


async def test_sink_replaces_stale_temp_and_existing_file(tmp_path: Path) -> None:
    dest = tmp_path / "f"
    dest.write_bytes(b"old")
    (tmp_path / ".f.tssd-part").write_bytes(b"left over by a crash")
    sink = FileSink(dest)
    await sink.write(b"new")
    await sink.commit()
    assert dest.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


async def test_sink_abort_removes_temp(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "f")
    await sink.write(b"x" * 100)
    await sink.abort()
    await sink.abort()  # idempotent: error paths may call it twice
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        await sink.write(b"more")


async def test_sink_abort_after_commit_keeps_file(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "f")
    await sink.write(b"data")
    await sink.commit()
    await sink.abort()
    assert (tmp_path / "f").read_bytes() == b"data"


async def test_sink_unwritable_directory(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "missing-dir" / "f")
    with pytest.raises(DestinationUnwritable) as caught:
        await sink.write(b"data")
    assert isinstance(caught.value.__cause__, OSError)
    assert not isinstance(caught.value, NoSpace)


@pytest.mark.parametrize(
    ("code", "expected"),
    [(errno.ENOSPC, NoSpace), (errno.EDQUOT, NoSpace), (errno.EIO, DestinationUnwritable)],
)
async def test_sink_commit_errors_are_mapped_and_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, expected: type[Exception]
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    sink = FileSink(tmp_path / "f")
    await sink.write(b"data")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(expected) as caught:
        await sink.commit()
    assert type(caught.value) is expected
    assert isinstance(caught.value.__cause__, OSError)
    assert list(tmp_path.iterdir()) == []


async def test_sink_write_enospc_is_no_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: FileSink, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(FileSink, "_write_sync", full)
    with pytest.raises(NoSpace):
        await FileSink(tmp_path / "f").write(b"data")


async def collect(source: FileSource) -> list[bytes]:
    return [chunk async for chunk in source.chunks()]


async def test_source_reads_in_chunks(tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK_SIZE + 5)
    path = tmp_path / "f"
    path.write_bytes(data)
    chunks = await collect(FileSource(path, len(data)))
    assert [len(c) for c in chunks] == [CHUNK_SIZE, CHUNK_SIZE, 5]
    assert b"".join(chunks) == data


async def test_source_empty_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    assert await collect(FileSource(tmp_path / "f", 0)) == []


async def test_source_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceUnreadable) as caught:
        await collect(FileSource(tmp_path / "nope", 1))
    assert isinstance(caught.value.__cause__, FileNotFoundError)


async def test_source_wrong_size(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"12345")
    with pytest.raises(SourceUnreadable):
        await collect(FileSource(tmp_path / "f", 4))


@pytest.mark.parametrize("change", ["grow", "shrink"])
async def test_source_size_change_while_reading(tmp_path: Path, change: str) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * (2 * CHUNK_SIZE))
    source = FileSource(path, 2 * CHUNK_SIZE)
    with pytest.raises(SourceUnreadable, match="changed size"):
        async for _ in source.chunks():
            if change == "grow":
                with path.open("ab") as fh:
                    fh.write(b"more")
            else:
                os.truncate(path, CHUNK_SIZE + 1)


async def test_counting_sink() -> None:
    sink = CountingSink()
    await sink.write(b"abc")
    await sink.write(b"def")
    assert await sink.commit() == (6, adler(b"abcdef"))
    await sink.abort()
    assert sink.nbytes == 0


async def test_retract_removes_the_delivered_file(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "f")
    await sink.write(b"data")
    await sink.commit()
    assert (tmp_path / "f").exists()
    await sink.retract()
    assert not (tmp_path / "f").exists()
    await sink.retract()  # nothing left: still fine

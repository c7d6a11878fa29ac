"""tssd.safepath and the file movers built on it: confinement where a file is opened."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tssd import safepath
from tssd.errors import DestinationUnwritable, ExpectedChecksumMismatch, SourceUnreadable
from tssd.files import FileSink, FileSource, _bounded, temp_path_for
from tssd.health import counts_against_hardware
from tssd.safepath import UnsafePath, place_of


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    (tmp_path / "pool" / "data").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"secret")
    return tmp_path / "pool"


def test_place_is_judged_by_the_words_of_the_path(pool: Path) -> None:
    roots = (str(pool),)
    assert place_of(f"{pool}/data/f", roots).parts == ("data", "f")
    assert place_of(f"{pool}/data/../data/f", roots).parts == ("data", "f")
    for bad in (f"{pool}/../outside/secret", f"{pool}-sibling/f", str(pool), "relative/f"):
        with pytest.raises(UnsafePath):
            place_of(bad, roots)
    assert place_of("/anywhere/f", ("/",)).parts == ("anywhere", "f")


def test_no_symlink_is_followed_below_the_root(pool: Path) -> None:
    roots = (str(pool),)
    (pool / "link").symlink_to(pool.parent / "outside", target_is_directory=True)
    (pool / "data" / "file-link").symlink_to(pool.parent / "outside" / "secret")
    for path in (f"{pool}/link/secret", f"{pool}/data/file-link"):
        with pytest.raises(UnsafePath, match="symlink"):
            safepath.open_regular(place_of(path, roots))


def test_only_regular_files_are_opened_and_a_fifo_does_not_block(pool: Path) -> None:
    fifo = pool / "data" / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UnsafePath, match="FIFO"):
        safepath.open_regular(place_of(str(fifo), (str(pool),)))
    assert time.monotonic() - started < 5
    (pool / "data" / "f").write_bytes(b"abc")
    fd, st = safepath.open_regular(place_of(f"{pool}/data/f", (str(pool),)))
    try:
        assert st.st_size == 3 and os.get_blocking(fd)
    finally:
        os.close(fd)


def test_create_exclusive_replaces_a_planted_symlink_without_writing_through(
    pool: Path,
) -> None:
    data = pool / "data"
    (data / "part").symlink_to(pool.parent / "outside" / "secret")
    parent = os.open(data, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = safepath.create_exclusive(parent, "part")
        os.write(fd, b"recalled")
        os.close(fd)
        (data / "dir").mkdir()
        with pytest.raises(UnsafePath, match="directory"):
            safepath.create_exclusive(parent, "dir")
    finally:
        os.close(parent)
    assert (pool.parent / "outside" / "secret").read_bytes() == b"secret"
    assert (data / "part").read_bytes() == b"recalled" and not (data / "part").is_symlink()


async def test_claim_sink_leaves_the_part_file_and_direct_sink_renames(pool: Path) -> None:
    roots = (str(pool),)
    target = pool / "data" / "f"
    sink = FileSink(target, roots, claim=True)
    await sink.write(b"hello")
    assert await sink.commit() == (5, "062c0215")
    assert not target.exists() and temp_path_for(target).read_bytes() == b"hello"
    await sink.retract()
    assert not temp_path_for(target).exists()
    direct = FileSink(target, roots)
    await direct.write(b"hello")
    await direct.commit()
    assert target.read_bytes() == b"hello" and not temp_path_for(target).exists()


async def test_sink_and_source_refuse_paths_through_symlinks(pool: Path) -> None:
    roots = (str(pool),)
    (pool / "swapped").symlink_to(pool.parent / "outside", target_is_directory=True)
    with pytest.raises(DestinationUnwritable, match="symlink"):
        await FileSink(pool / "swapped" / "f", roots).write(b"x")
    with pytest.raises(SourceUnreadable, match="symlink"):
        async for _ in FileSource(pool / "swapped" / "secret", 6, roots).chunks():
            pass
    assert sorted(p.name for p in (pool.parent / "outside").iterdir()) == ["secret"]


async def test_a_stuck_file_operation_is_bounded() -> None:
    release = threading.Event()
    with pytest.raises(OSError) as stuck:
        await _bounded(0.2, "read", release.wait, 30)
    release.set()
    assert stuck.value.errno == errno.ETIMEDOUT


async def test_cancel_frees_a_stuck_file_operation_at_once() -> None:
    release, cancel = threading.Event(), asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, cancel.set)
    started = time.monotonic()
    with pytest.raises(OSError) as stuck:
        await _bounded(30.0, "read", release.wait, 30, cancel=cancel)
    release.set()
    assert stuck.value.errno == errno.ECANCELED
    assert time.monotonic() - started < 5


async def test_a_cancelled_migration_stops_reading_its_source(pool: Path) -> None:
    (pool / "data" / "f").write_bytes(b"x" * (3 * 1024 * 1024))
    cancel = asyncio.Event()

    @contextlib.contextmanager
    def watch() -> Iterator[asyncio.Event]:
        yield cancel

    source = FileSource(pool / "data" / "f", 3 * 1024 * 1024, (str(pool),), watch=watch)
    chunks = source.chunks()
    assert len(await anext(chunks)) == 1024 * 1024
    cancel.set()  # an operator cancelled the request: the next read gives up
    with pytest.raises(SourceUnreadable, match="cancelled"):
        await anext(chunks)


def test_a_held_root_that_is_a_symlink_is_followed_once(pool: Path) -> None:
    link = pool.parent / "link"
    link.symlink_to(pool, target_is_directory=True)
    (pool.parent / "outside" / "data").mkdir()
    roots = safepath.HeldRoots([str(link)])
    try:
        assert roots.spellings == (str(link), str(pool))
        turned = pool.parent / "turned"
        turned.symlink_to(pool.parent / "outside", target_is_directory=True)
        turned.replace(link)
        # Named by the configured spelling or the resolved one: the root held at start.
        for path in (f"{link}/data/f", f"{pool}/data/f"):
            parent = safepath.open_parent(roots.place(path))
            try:
                fd = safepath.create_exclusive(parent, "f")
                os.close(fd)
            finally:
                os.close(parent)
        assert (pool / "data" / "f").exists()
        assert list((pool.parent / "outside" / "data").iterdir()) == []
    finally:
        roots.close()
    with pytest.raises(UnsafePath):
        roots.place(f"{link}/data/f")


def test_a_root_missing_at_start_is_held_at_first_use(tmp_path: Path) -> None:
    later = tmp_path / "later"
    roots = safepath.HeldRoots([str(later)])
    try:
        with pytest.raises(UnsafePath, match="cannot be opened"):
            roots.place(f"{later}/f")
        later.mkdir()
        place = roots.place(f"{later}/f")
        assert place.root_fd is not None and place.parts == ("f",)
    finally:
        roots.close()


@pytest.mark.parametrize("claim", [False, True], ids=["direct", "claim"])
def test_a_sink_commits_nothing_but_the_expected_checksum(pool: Path, claim: bool) -> None:
    async def deliver(expected: str) -> None:
        sink = FileSink(pool / "data" / "f", (str(pool),), claim=claim, expected_adler32=expected)
        await sink.write(b"recalled bytes")
        await sink.commit()

    with pytest.raises(ExpectedChecksumMismatch) as caught:
        asyncio.run(deliver("00000001"))
    assert not counts_against_hardware(caught.value)
    assert list((pool / "data").iterdir()) == []
    right = f"{zlib.adler32(b'recalled bytes'):08X}"  # another spelling of the same value
    asyncio.run(deliver(right))
    name = temp_path_for(pool / "data" / "f").name if claim else "f"
    assert [p.name for p in (pool / "data").iterdir()] == [name]

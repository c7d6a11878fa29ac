"""File-based data movers: the :class:`~tssd.backends.base.Sink` and
:class:`~tssd.backends.base.Source` implementations used on pool disk.

Blocking file calls run in worker threads (one per chunk) so that a multi-gigabyte file
never stalls the event loop that also serves the API and the scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import zlib
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import structlog

from tssd import safepath
from tssd.errors import (
    AccessDenied,
    DestinationUnwritable,
    ExpectedChecksumMismatch,
    NoSpace,
    OutsidePoolRoots,
    SourceUnreadable,
)

CHUNK_SIZE = 1024 * 1024
TEMP_SUFFIX = ".tssd-part"
#: Longest one file call (open, a chunk's read or write, fsync) may take.
DEFAULT_OP_TIMEOUT_S = 300.0

#: The pool root of a daemon with no ``api.pool_roots``, under ``$TSSD_HOME``.
DEFAULT_POOLS_DIR = "pools"

T = TypeVar("T")

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_DENIED = frozenset({errno.EACCES, errno.EPERM})

log = structlog.get_logger()


def adler32_hex(value: int) -> str:
    """The form dCache uses for adler32: eight lower-case hex digits."""
    return f"{value & 0xFFFFFFFF:08x}"


def same_adler32(a: str, b: str) -> bool:
    """Whether two spellings of an adler32 (case, leading zeros) are the same value."""
    try:
        return int(a, 16) == int(b, 16)
    except ValueError:
        return a == b


def temp_path_for(path: Path) -> Path:
    """The hidden name a file is written under before it is renamed into place."""
    return path.with_name(f".{path.name}{TEMP_SUFFIX}")


def _write_error(exc: OSError, path: Path) -> DestinationUnwritable | NoSpace | AccessDenied:
    message = f"cannot write {path}: {exc.strerror or exc}"
    if exc.errno in _NO_SPACE:
        return NoSpace(message)
    if exc.errno in _DENIED:
        return AccessDenied(message)
    return DestinationUnwritable(message)


async def _bounded(
    timeout_s: float,
    what: str,
    func: Callable[..., T],
    *args: Any,
    cancel: asyncio.Event | None = None,
) -> T:
    """Run a blocking file call in a thread; give up on it after *timeout_s*, or as soon as
    *cancel* is set (the request was cancelled).

    A thread stuck in the kernel (a hung NFS server) cannot be killed, but the session
    waiting for it can go on: the request fails and its drive is free again.
    """
    cancelled = OSError(errno.ECANCELED, f"{what} abandoned: the request was cancelled")
    if cancel is not None and cancel.is_set():
        raise cancelled
    work = asyncio.ensure_future(asyncio.to_thread(func, *args))
    stop = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        waiting = {work} if stop is None else {work, stop}
        done, _ = await asyncio.wait(waiting, timeout=timeout_s, return_when=FIRST_COMPLETED)
    finally:
        if stop is not None:
            stop.cancel()
        if not work.done():
            work.cancel()  # the thread runs on; its result is dropped
    if stop is not None and stop in done:
        raise cancelled
    if work in done:
        return work.result()
    raise OSError(errno.ETIMEDOUT, f"{what} took longer than {timeout_s:g} s")


class FileSink:
    """Writes ``.<name>.tssd-part`` beside *path*, confined to its pool root (tssd.safepath).

    :meth:`commit` fsyncs it and, unless *claim*, renames it into place. With *claim* the
    part file stays: the pool's next call (``tss-hsm``) renames it into place, so nothing
    appears at *path* once dCache has given up (docs/dcache.md, "Delivery").
    Readers of the destination directory therefore see either nothing or the complete,
    fsynced file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        roots: safepath.Roots = (),
        *,
        claim: bool = False,
        op_timeout_s: float = DEFAULT_OP_TIMEOUT_S,
        expected_adler32: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.temp_path = temp_path_for(self.path)
        self.roots = roots
        self.claim = claim
        #: The checksum the requester expects (dCache's ``flag-c``): other bytes are never
        #: committed, whatever the tape's catalog says of them.
        self.expected_adler32 = expected_adler32
        self.op_timeout_s = op_timeout_s
        self._fh: BinaryIO | None = None
        self._parent: int | None = None
        self._nbytes = 0
        self._adler = zlib.adler32(b"")
        self._done = False

    @property
    def nbytes(self) -> int:
        """Bytes written so far."""
        return self._nbytes

    async def write(self, data: bytes) -> None:
        if self._done:
            raise RuntimeError(f"sink for {self.path} is already committed or aborted")
        try:
            await _bounded(self.op_timeout_s, "write", self._write_sync, data)
        except OSError as exc:
            raise _write_error(exc, self.temp_path) from exc

    def _open_sync(self) -> BinaryIO:
        if self._parent is None:
            self._parent = safepath.open_parent(safepath.place_of(str(self.path), self.roots))
        fd = safepath.create_exclusive(self._parent, self.temp_path.name)
        return os.fdopen(fd, "wb")

    def _write_sync(self, data: bytes) -> None:
        if self._fh is None:
            self._fh = self._open_sync()
        self._fh.write(data)
        self._adler = zlib.adler32(data, self._adler)
        self._nbytes += len(data)

    async def commit(self) -> tuple[int, str]:
        if self._done:
            raise RuntimeError(f"sink for {self.path} is already committed or aborted")
        actual = adler32_hex(self._adler)
        if self.expected_adler32 is not None and not same_adler32(actual, self.expected_adler32):
            await self.abort()
            raise ExpectedChecksumMismatch(
                f"adler32 {actual} does not match the expected {self.expected_adler32}; "
                f"nothing written to {self.path}"
            )
        try:
            await _bounded(self.op_timeout_s, "commit", self._commit_sync)
        except OSError as exc:
            await self.abort()
            raise _write_error(exc, self.path) from exc
        self._done = True
        self._close_parent()
        return self._nbytes, actual

    def _commit_sync(self) -> None:
        if self._fh is None:  # an empty object still has to appear at its place
            self._fh = self._open_sync()
        fh, self._fh = self._fh, None
        try:
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fh.close()
        assert self._parent is not None
        if not self.claim:
            safepath.rename_in(self._parent, self.temp_path.name, self.path.name)
        if not safepath.fsync_dir(self._parent):
            # The file itself is complete; only the directory entry may be lost in a crash.
            log.warning("files.dir_fsync_failed", path=str(self.path.parent))

    async def abort(self) -> None:
        """Remove the temporary file. Never raises: it runs on error paths."""
        if self._done:
            return
        self._done = True
        try:
            await _bounded(self.op_timeout_s, "abort", self._abort_sync)
        except OSError as exc:
            log.warning("files.abort_failed", path=str(self.temp_path), error=str(exc))
        self._close_parent()

    async def retract(self) -> None:
        """Remove what commit left (the part file, or the delivered file): its request was
        cancelled while it was being read."""
        name = self.temp_path.name if self.claim else self.path.name
        try:
            await _bounded(
                self.op_timeout_s, "retract", unlink_confined, self.path, name, self.roots
            )
        except OSError as exc:
            log.warning("files.retract_failed", path=str(self.path), error=str(exc))

    def _abort_sync(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()
        if self._parent is not None:
            safepath.unlink_in(self._parent, self.temp_path.name)

    def _close_parent(self) -> None:
        parent, self._parent = self._parent, None
        if parent is not None:
            os.close(parent)

    def __del__(self) -> None:
        self._close_parent()


def unlink_confined(path: Path, name: str, roots: safepath.Roots) -> bool:
    """Unlink *name* in *path*'s directory, reached without symlinks below its root."""
    parent = safepath.open_parent(safepath.place_of(str(path), roots))
    try:
        return safepath.unlink_in(parent, name)
    finally:
        os.close(parent)


class FileSource:
    """Reads a file to migrate, in :data:`CHUNK_SIZE` pieces, checking its size.

    Opened confined to its pool root, without following symlinks and with
    ``O_NONBLOCK``: a FIFO, a device or anything but a regular file fails the request at
    once instead of holding a drive (tssd.safepath).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        size: int,
        roots: safepath.Roots = (),
        *,
        op_timeout_s: float = DEFAULT_OP_TIMEOUT_S,
        watch: Callable[[], contextlib.AbstractContextManager[asyncio.Event]] | None = None,
    ) -> None:
        self.path = Path(path)
        self.size = size
        self.roots = roots
        self.op_timeout_s = op_timeout_s
        #: An event set when the request is cancelled: a read stuck meanwhile is dropped.
        self.watch = watch
        self._cancel: asyncio.Event | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        with self.watch() if self.watch is not None else contextlib.nullcontext() as cancel:
            self._cancel = cancel
            async for data in self._chunks():
                yield data

    async def _chunks(self) -> AsyncIterator[bytes]:
        fh = await self._open()
        try:
            total = 0
            while True:
                data = await self._read(fh)
                if not data:
                    break
                total += len(data)
                if total > self.size:
                    break
                yield data
            if total != self.size:
                raise SourceUnreadable(
                    f"{self.path} changed size while being read: expected {self.size} bytes"
                )
        finally:
            fh.close()

    async def _open(self) -> BinaryIO:
        try:
            fh, actual = await _bounded(
                self.op_timeout_s, "open", self._open_sync, cancel=self._cancel
            )
        except OSError as exc:
            message = f"cannot open {self.path}: {exc.strerror or exc}"
            if exc.errno in _DENIED:
                raise AccessDenied(message) from exc
            raise SourceUnreadable(message) from exc
        if actual != self.size:
            fh.close()
            raise SourceUnreadable(f"{self.path} has {actual} bytes, expected {self.size}")
        return fh

    def _open_sync(self) -> tuple[BinaryIO, int]:
        fd, st = safepath.open_regular(safepath.place_of(str(self.path), self.roots))
        return os.fdopen(fd, "rb"), st.st_size

    async def _read(self, fh: BinaryIO) -> bytes:
        try:
            return await _bounded(
                self.op_timeout_s, "read", fh.read, CHUNK_SIZE, cancel=self._cancel
            )
        except OSError as exc:
            raise SourceUnreadable(f"cannot read {self.path}: {exc.strerror or exc}") from exc


class CountingSink:
    """Counts bytes and their adler32 and keeps nothing (simulation, dry runs)."""

    def __init__(self) -> None:
        self.nbytes = 0
        self._adler = zlib.adler32(b"")
        self.committed = False
        self.aborted = False

    async def write(self, data: bytes) -> None:
        self._adler = zlib.adler32(data, self._adler)
        self.nbytes += len(data)

    def account(self, nbytes: int) -> None:
        """Count *nbytes* that were never materialised (simulated objects without data)."""
        self.nbytes += nbytes

    async def commit(self) -> tuple[int, str]:
        self.committed = True
        return self.nbytes, adler32_hex(self._adler)

    async def retract(self) -> None:
        self.nbytes = 0

    async def abort(self) -> None:
        self.aborted = True
        self.nbytes = 0
        self._adler = zlib.adler32(b"")


class PoolRoots:
    """The directories recall destinations and migrate sources must lie in.

    They are ``api.pool_roots`` plus every ``tssd serve --pool-root``; with neither, only
    ``$TSSD_HOME/pools`` (:func:`effective_roots`): a default install confines what a
    client can reach. At submit a path is judged by where it really leads (``..`` and
    symlinks resolved) for a clear early answer; the binding check is where the file is
    opened (:mod:`tssd.safepath`: below the root, no symlink followed). ``/`` as a root
    lifts the confinement.
    """

    def __init__(self, roots: tuple[str, ...]) -> None:
        real = tuple(os.path.realpath(r) for r in roots)
        self.configured = tuple(dict.fromkeys(os.path.normpath(r) for r in roots))
        self.roots = real
        #: As configured and as resolved: dCache names paths by the configured spelling.
        self.paths = tuple(dict.fromkeys(os.path.normpath(r) for r in (*roots, *real)))

    @staticmethod
    @functools.lru_cache(maxsize=8)
    def from_setting(text: str) -> PoolRoots:
        """The roots of a comma-separated ``api.pool_roots`` value."""
        return PoolRoots(tuple(r.strip() for r in text.split(",") if r.strip()))

    def contains(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip("/") + "/") for root in self.roots)

    def check(self, path: str | None, what: str) -> None:
        """Refuse *path* (raise :class:`OutsidePoolRoots`) unless it lies inside a root."""
        if path is None or self.contains(path):
            return
        log.warning("api.path_refused", path=path, what=what, roots=list(self.roots))
        raise OutsidePoolRoots(
            f"{what} {path} is not inside a pool root of tssd: start it with "
            "--pool-root <the pool's data directory> (or set api.pool_roots)"
        )


def effective_roots(pool_roots: str, home: Path) -> str:
    """The ``api.pool_roots`` value a daemon enforces: the setting, or ``$TSSD_HOME/pools``."""
    return pool_roots if pool_roots.strip() else str(home / DEFAULT_POOLS_DIR)

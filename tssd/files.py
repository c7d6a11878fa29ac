"""File-based data movers: the :class:`~tssd.backends.base.Sink` and
:class:`~tssd.backends.base.Source` implementations used on pool disk.

Blocking file calls run in worker threads (one per chunk) so that a multi-gigabyte file
never stalls the event loop that also serves the API and the scheduler.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

import structlog

from tssd.errors import (
    AccessDenied,
    DestinationUnwritable,
    InvalidRequest,
    NoSpace,
    SourceUnreadable,
)

CHUNK_SIZE = 1024 * 1024
TEMP_SUFFIX = ".tssd-part"

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_DENIED = frozenset({errno.EACCES, errno.EPERM})

log = structlog.get_logger()


def adler32_hex(value: int) -> str:
    """The form dCache uses for adler32: eight lower-case hex digits."""
    return f"{value & 0xFFFFFFFF:08x}"


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


class FileSink:
    """Writes to ``.<name>.tssd-part`` beside *path*; :meth:`commit` renames it into place.

    Readers of the destination directory (the dCache ENDIT plugin, a pool) therefore see
    either nothing or the complete, fsynced file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.temp_path = temp_path_for(self.path)
        self._fh: BinaryIO | None = None
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
            await asyncio.to_thread(self._write_sync, data)
        except OSError as exc:
            raise _write_error(exc, self.temp_path) from exc

    def _write_sync(self, data: bytes) -> None:
        if self._fh is None:
            self._fh = open(self.temp_path, "wb")  # noqa: SIM115 - closed in commit/abort
        self._fh.write(data)
        self._adler = zlib.adler32(data, self._adler)
        self._nbytes += len(data)

    async def commit(self) -> tuple[int, str]:
        if self._done:
            raise RuntimeError(f"sink for {self.path} is already committed or aborted")
        try:
            await asyncio.to_thread(self._commit_sync)
        except OSError as exc:
            await self.abort()
            raise _write_error(exc, self.path) from exc
        self._done = True
        return self._nbytes, adler32_hex(self._adler)

    def _commit_sync(self) -> None:
        if self._fh is None:  # an empty object still has to appear at its place
            self._fh = open(self.temp_path, "wb")  # noqa: SIM115 - closed just below
        fh, self._fh = self._fh, None
        try:
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fh.close()
        os.replace(self.temp_path, self.path)
        _fsync_dir(self.path.parent)

    async def abort(self) -> None:
        """Remove the temporary file. Never raises: it runs on error paths."""
        if self._done:
            return
        self._done = True
        try:
            await asyncio.to_thread(self._abort_sync)
        except OSError as exc:
            log.warning("files.abort_failed", path=str(self.temp_path), error=str(exc))

    async def retract(self) -> None:
        """Remove the delivered file of a request cancelled while it was being read."""
        try:
            await asyncio.to_thread(self.path.unlink, missing_ok=True)
        except OSError as exc:
            log.warning("files.retract_failed", path=str(self.path), error=str(exc))

    def _abort_sync(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()
        self.temp_path.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk. Some file systems
    # (NFS, FUSE) refuse fsync on a directory; the file itself is complete, so go on.
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("files.dir_fsync_failed", path=str(directory), error=str(exc))


class FileSource:
    """Reads a file to migrate, in :data:`CHUNK_SIZE` pieces, checking its size."""

    def __init__(self, path: str | os.PathLike[str], size: int) -> None:
        self.path = Path(path)
        self.size = size

    async def chunks(self) -> AsyncIterator[bytes]:
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
            fh, actual = await asyncio.to_thread(self._open_sync)
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
        fh = open(self.path, "rb")  # noqa: SIM115 - the caller closes it
        try:
            return fh, os.fstat(fh.fileno()).st_size
        except OSError:
            fh.close()
            raise

    async def _read(self, fh: BinaryIO) -> bytes:
        try:
            return await asyncio.to_thread(fh.read, CHUNK_SIZE)
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
    """The directories recall destinations and migrate sources must lie in (api.pool_roots).

    A path is judged by where it really leads: ``..`` and symlinks (of the directories and
    of the file itself, if it exists) are resolved first, so neither leads out of a root.
    No roots means no restriction.
    """

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = tuple(os.path.realpath(r) for r in roots)

    @staticmethod
    @functools.lru_cache(maxsize=8)
    def from_setting(text: str) -> PoolRoots:
        """The roots of a comma-separated ``api.pool_roots`` value."""
        return PoolRoots(tuple(r.strip() for r in text.split(",") if r.strip()))

    def contains(self, path: str) -> bool:
        if not self.roots:
            return True
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip("/") + "/") for root in self.roots)

    def check(self, path: str | None, what: str) -> None:
        """Refuse *path* (raise :class:`InvalidRequest`) unless it lies inside a root."""
        if path is None or self.contains(path):
            return
        log.warning("api.path_refused", path=path, what=what, roots=list(self.roots))
        raise InvalidRequest(f"{what} {path} is not inside a configured pool root (api.pool_roots)")

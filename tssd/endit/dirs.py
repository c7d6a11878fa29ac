"""An ENDIT base directory held open: every file operation below it is confined.

The pool's user (or anyone who can write there) may replace ``in/``, ``out/``,
``request/`` or ``trash/`` by a symlink, or plant one at a name tssd writes. So the base
directory is opened once, at start (or when it first appears; the path it resolved to is
logged as ``endit.root_opened``), and every operation
goes through descriptors: each subdirectory is opened relative to the base with
``O_NOFOLLOW | O_DIRECTORY`` at each use (a symlinked subdirectory is refused, logged
as ``endit.dir_refused`` and counted, never followed), files are opened relative to it
with ``O_NOFOLLOW`` and checked with ``fstat``, written under a temporary name created
with ``O_EXCL`` and renamed with ``renameat``, and unlinked relative to it
(tssd.safepath's discipline, as for pool paths).

Every method blocks: callers run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import structlog

from tssd import safepath
from tssd.shim.names import PNFSID

log = structlog.get_logger()

SUBDIRS = ("in", "out", "request", "trash")


class RefusedDir(safepath.UnsafePath):
    """A subdirectory that is a symlink or not a directory: never followed."""


@dataclass(frozen=True)
class Listing:
    """The protocol names of a subdirectory: regular files, and the other entries."""

    files: set[str]
    others: set[str]


class EnditPaths:
    """The base directory of one ENDIT plugin, held open as a directory descriptor."""

    def __init__(self, base: Path | str, on_refused: Callable[[str], None] | None = None) -> None:
        self.base = Path(base)
        self._fd = -1
        self._on_refused = on_refused
        self._lock = threading.Lock()
        self._refused: set[str] = set()  # subdirectories refused, logged once until fixed
        self._others: dict[str, set[str]] = {s: set() for s in SUBDIRS}  # logged once
        with contextlib.suppress(OSError):  # absent: opened when it appears
            self._root()

    @property
    def inbox(self) -> Path:
        return self.base / "in"

    @property
    def out(self) -> Path:
        return self.base / "out"

    @property
    def request(self) -> Path:
        return self.base / "request"

    @property
    def trash(self) -> Path:
        return self.base / "trash"

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _root(self) -> int:
        """The base directory's descriptor, opened on the first call that finds it."""
        with self._lock:
            if self._fd < 0:
                self._fd = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                log.info("endit.root_opened", directory=str(self.base), resolved=_where(self._fd))
            return self._fd

    # -- subdirectories ----------------------------------------------------------------

    @contextlib.contextmanager
    def opened(self, sub: str) -> Iterator[int]:
        """A descriptor of the subdirectory *sub*, closed on exit."""
        try:
            fd = safepath.open_subdir(self._root(), sub)
        except safepath.UnsafePath as exc:
            self._refuse(sub)
            where = str(self.base / sub)
            raise RefusedDir(exc.errno, "a symlink or not a directory", where) from exc
        with self._lock:
            self._refused.discard(sub)
        try:
            yield fd
        finally:
            os.close(fd)

    def _refuse(self, sub: str) -> None:
        with self._lock:
            first = sub not in self._refused
            self._refused.add(sub)
        if first:
            log.error(
                "endit.dir_refused",
                directory=str(self.base),
                subdir=sub,
                error="a symlink or not a directory: not followed",
            )
            if self._on_refused is not None:
                self._on_refused(sub)

    def missing(self) -> list[Path]:
        """Subdirectories that are absent or refused (the plugin creates none of them)."""
        absent = []
        for sub in SUBDIRS:
            try:
                with self.opened(sub):
                    pass
            except OSError:
                absent.append(self.base / sub)
        return absent

    def listing(self, sub: str) -> Listing | None:
        """The protocol names in *sub*; None if it cannot be read (absent, refused)."""
        try:
            with self.opened(sub) as fd, os.scandir(fd) as it:
                files: set[str] = set()
                others: set[str] = set()
                for entry in it:
                    if PNFSID.fullmatch(entry.name):
                        regular = entry.is_file(follow_symlinks=False)
                        (files if regular else others).add(entry.name)
        except OSError:
            return None
        self._note_others(sub, others)
        return Listing(files, others)

    def _note_others(self, sub: str, others: set[str]) -> None:
        # A directory or symlink with a protocol name is never a protocol file: ignored,
        # and said once (not at every pass).
        with self._lock:
            new = others - self._others[sub]
            self._others[sub] = set(others)
        for name in sorted(new):
            log.warning("endit.not_a_file", directory=str(self.base), subdir=sub, name=name)

    def statvfs(self, sub: str) -> os.statvfs_result:
        with self.opened(sub) as fd:
            return os.fstatvfs(fd)

    # -- files ---------------------------------------------------------------------------

    def lstat(self, sub: str, name: str) -> os.stat_result | None:
        """``lstat`` of *sub*/*name*; None if it (or *sub*) is not there or is refused."""
        try:
            with self.opened(sub) as fd:
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None

    def exists(self, sub: str, name: str) -> bool:
        """Whether anything is at *sub*/*name*; raises if *sub* cannot be opened."""
        with self.opened(sub) as fd:
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
        return True

    def regular(self, sub: str, name: str) -> os.stat_result | None:
        """Like :meth:`lstat`, for a regular file only."""
        st = self.lstat(sub, name)
        return st if st is not None and stat.S_ISREG(st.st_mode) else None

    def open_file(self, sub: str, name: str) -> tuple[BinaryIO, os.stat_result]:
        """Open the regular file *sub*/*name* for reading (no symlink, FIFO or device)."""
        with self.opened(sub) as parent:
            fd, st = safepath.open_regular_at(parent, name)
        return os.fdopen(fd, "rb"), st

    def unlink(self, sub: str, name: str) -> bool:
        """Unlink the regular file *sub*/*name*; False if no such file is there.

        Anything else at the name (a directory, a symlink: never a file tssd gave or
        took) stays.
        """
        with self.opened(sub) as fd:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if not stat.S_ISREG(st.st_mode):
                return False
            return safepath.unlink_in(fd, name)

    def write_atomic(self, sub: str, name: str, data: bytes, temp: str) -> None:
        """Write *data* to *sub*/*name* by way of the temporary name *temp*.

        Whatever is at *temp* (a stale file, a planted symlink) is unlinked, never
        followed; *temp* is created with ``O_EXCL`` and renamed over *name*.
        """
        with self.opened(sub) as parent:
            fd = safepath.create_exclusive(parent, temp)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                safepath.rename_in(parent, temp, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                raise


def _where(fd: int) -> str:
    """The path the kernel has for the directory *fd* (what a symlinked path led to)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"

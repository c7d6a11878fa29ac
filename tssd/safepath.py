"""Pool paths opened where they are used: below a root, without following any symlink.

A path checked when a request is submitted may be a different file when tssd opens it
minutes later (a symlink planted at the part file's name, a directory swapped for a
symlink). So every pool path is opened relative to a directory descriptor of its root,
one component at a time with ``O_NOFOLLOW``: a symlink anywhere below the root makes the
open fail instead of leading elsewhere. Files are checked with ``fstat`` on the opened
descriptor (only regular files are read or written), part files are created with
``O_EXCL``, and renames and unlinks are relative to the parent's descriptor.

A root is resolved once, when the daemon starts (:class:`HeldRoots`), and held open as
a directory descriptor: a root that is itself a symlink (``/pool`` to ``/srv/pool1``) is
followed then and never again, so retargeting it later leads nowhere new.

Every function here blocks: callers run them in a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

log = structlog.get_logger()


class UnsafePath(OSError):
    """A path that leads out of its root, through a symlink, or to a non-regular file."""


@dataclass(frozen=True)
class Place:
    """Where a pool path lies: its root and the components below it (the last is the name)."""

    root: str
    parts: tuple[str, ...]
    #: The root's descriptor held since start (:class:`HeldRoots`); None: opened by name.
    root_fd: int | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def path(self) -> str:
        return os.path.join(self.root, *self.parts)


class HeldRoots:
    """Pool roots resolved once and held open as directory descriptors.

    Each root is resolved (``realpath``) and opened when this is made, at the daemon's
    start, and logged (``pool.root_resolved``); a root missing then is resolved and held
    at its first use. A path names its root by the configured spelling or the resolved
    one; either way the file is reached from the held descriptor, never by the root's
    name again. :meth:`close` closes them (the daemon's exit stack).
    """

    def __init__(self, roots: Iterable[str]) -> None:
        self.configured = tuple(dict.fromkeys(os.path.normpath(r) for r in roots))
        self._lock = threading.Lock()
        self._closed = False
        self._fds: list[int | None] = [None] * len(self.configured)
        #: (spelling, index of its root), configured spellings first.
        self._spellings: list[tuple[str, int]] = list(
            (root, i) for i, root in enumerate(self.configured)
        )
        for index, root in enumerate(self.configured):
            try:
                self._hold(index)
            except UnsafePath as exc:  # held at its first use, if it is there by then
                log.warning("pool.root_unavailable", root=root, error=exc.strerror)

    def __bool__(self) -> bool:
        return bool(self.configured)

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every name a root is known by: as configured, and as resolved once."""
        return tuple(dict.fromkeys(s for s, _ in self._spellings))

    def place(self, path: str) -> Place:
        """The :class:`Place` of *path* under the first root that contains it, with that
        root's held descriptor (see :func:`place_of`)."""
        normal = _absolute(path)
        for spelling, index in self._spellings:
            parts = _below(normal, spelling)
            if parts is not None:
                fd = self._fds[index]
                if fd is None:
                    fd = self._hold(index)
                return Place(self.configured[index], parts, root_fd=fd)
        raise UnsafePath(errno.EACCES, "not inside a pool root", path)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            fds, self._fds = self._fds, [None] * len(self.configured)
        for fd in fds:
            if fd is not None:
                os.close(fd)

    def _hold(self, index: int) -> int:
        root = self.configured[index]
        with self._lock:
            held = self._fds[index]
            if held is not None:
                return held
            if self._closed:
                raise UnsafePath(errno.EBADF, "pool roots closed (tssd is stopping)", root)
            resolved = os.path.realpath(root)
            try:
                fd = os.open(resolved, _ROOT_FLAGS)
            except OSError as exc:
                message = f"pool root cannot be opened ({exc.strerror or exc})"
                raise UnsafePath(exc.errno or errno.ENOENT, message, root) from exc
            self._fds[index] = fd
            if resolved != root:
                self._spellings.append((resolved, index))
        log.info("pool.root_resolved", root=root, resolved=resolved, symlink=resolved != root)
        return fd


#: Where files are confined: root names (opened by name at each use) or held roots.
Roots = tuple[str, ...] | HeldRoots


def place_of(path: str, roots: Roots) -> Place:
    """The :class:`Place` of *path* (absolute) under the first root that contains it.

    Judged by the words of the path only (``..`` is resolved lexically): symlinks are
    refused later, when each component is opened. With no roots, the parent directory
    is the root (daemon-internal files such as the simulated library's objects).
    """
    if isinstance(roots, HeldRoots):
        return roots.place(path)
    normal = _absolute(path)
    if not roots:
        parent, name = os.path.split(normal)
        return Place(parent, (name,))
    for root in roots:
        base = os.path.normpath(root)
        parts = _below(normal, base)
        if parts is not None:
            return Place(base, parts)
    raise UnsafePath(errno.EACCES, "not inside a pool root", path)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise UnsafePath(errno.EINVAL, "not an absolute path", path)
    return os.path.normpath(path)


def _below(normal: str, root: str) -> tuple[str, ...] | None:
    prefix = root.rstrip("/") + "/"
    if normal.startswith(prefix) and len(normal) > len(prefix):
        return tuple(normal[len(prefix) :].split("/"))
    return None


def open_parent(place: Place) -> int:
    """A descriptor of the directory holding *place*'s file, reached without symlinks."""
    if place.root_fd is not None:
        # A new descriptor of the held root: the caller closes what it is given.
        fd = os.open(".", _ROOT_FLAGS, dir_fd=place.root_fd)
    else:
        fd = os.open(place.root, _ROOT_FLAGS)
    try:
        for part in place.parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _explain(exc, place, part) from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(place: Place) -> tuple[int, os.stat_result]:
    """Open *place* for reading: no symlink, no FIFO or device; blocking reads after."""
    parent = open_parent(place)
    try:
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer.
            fd = os.open(place.name, _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise _explain(exc, place, place.name) from exc
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(errno.EINVAL, f"not a regular file ({_kind(st.st_mode)})", place.path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def create_exclusive(parent: int, name: str, mode: int = 0o666) -> int:
    """Create *name* in *parent* for writing (mode as open() gives: the umask decides);
    whatever was there goes first.

    A stale part file (a crash) or a symlink planted at its name is unlinked (unlink
    never follows a symlink), then the file is created with ``O_EXCL``: if anything
    appears in between, the create fails rather than write through it.
    """
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except IsADirectoryError as exc:
        raise UnsafePath(errno.EISDIR, "a directory is in the way", name) from exc
    fd = os.open(name, _CREATE_FLAGS, mode, dir_fd=parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise UnsafePath(errno.EINVAL, "created file is not a plain regular file", name)
    except BaseException:
        os.close(fd)
        raise
    return fd


def rename_in(parent: int, source: str, target: str) -> None:
    """Rename *source* to *target* inside the directory *parent* (``renameat``)."""
    os.rename(source, target, src_dir_fd=parent, dst_dir_fd=parent)


def unlink_in(parent: int, name: str) -> bool:
    """Unlink *name* in *parent*; False if it was not there."""
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        return False
    return True


def fsync_dir(fd: int) -> bool:
    """fsync a directory; False where the file system refuses (NFS, FUSE)."""
    try:
        os.fsync(fd)
    except OSError:
        return False
    return True


def _explain(exc: OSError, place: Place, part: str) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return UnsafePath(exc.errno, f"{part!r} is a symlink or not a directory", place.path)
    return exc


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
    ):
        if test(mode):
            return name
    return "special file"


def open_regular_at(parent: int, name: str) -> tuple[int, os.stat_result]:
    """Open *name* in the directory *parent* for reading, as :func:`open_regular` does."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(exc.errno, f"{name!r} is a symlink", name) from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(errno.EINVAL, f"not a regular file ({_kind(st.st_mode)})", name)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_subdir(parent: int, name: str) -> int:
    """A descriptor of the directory *name* in *parent*; a symlink there is refused."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(exc.errno, f"{name!r} is a symlink or not a directory", name) from exc
        raise

"""Pool paths opened where they are used: below a root, without following any symlink.

A path checked when a request is submitted may be a different file when tssd opens it
minutes later (a symlink planted at the part file's name, a directory swapped for a
symlink). So every pool path is opened relative to a directory descriptor of its root,
one component at a time with ``O_NOFOLLOW``: a symlink anywhere below the root makes the
open fail instead of leading elsewhere. Files are checked with ``fstat`` on the opened
descriptor (only regular files are read or written), part files are created with
``O_EXCL``, and renames and unlinks are relative to the parent's descriptor.

Every function here blocks: callers run them in a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A path that leads out of its root, through a symlink, or to a non-regular file."""


@dataclass(frozen=True)
class Place:
    """Where a pool path lies: its root and the components below it (the last is the name)."""

    root: str
    parts: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def path(self) -> str:
        return os.path.join(self.root, *self.parts)


def place_of(path: str, roots: tuple[str, ...]) -> Place:
    """The :class:`Place` of *path* (absolute) under the first root that contains it.

    Judged by the words of the path only (``..`` is resolved lexically): symlinks are
    refused later, when each component is opened. With no roots, the parent directory
    is the root (daemon-internal files such as the simulated library's objects).
    """
    if not os.path.isabs(path):
        raise UnsafePath(errno.EINVAL, "not an absolute path", path)
    normal = os.path.normpath(path)
    if not roots:
        parent, name = os.path.split(normal)
        return Place(parent, (name,))
    for root in roots:
        base = os.path.normpath(root)
        prefix = base.rstrip("/") + "/"
        if normal.startswith(prefix) and len(normal) > len(prefix):
            return Place(base, tuple(normal[len(prefix) :].split("/")))
    raise UnsafePath(errno.EACCES, "not inside a pool root", path)


def open_parent(place: Place) -> int:
    """A descriptor of the directory holding *place*'s file, reached without symlinks."""
    fd = os.open(place.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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

"""The pool's files as tss-hsm handles them: the source of a put, the destination of a get.

A recall arrives as tssd's part file beside its destination; this call renames it into
place, checks its size against what the daemon reports, compares the adler32 with the one
dCache gave, and leaves the ``.crcval`` dCache reads after exit 0 (docs/dcache.md,
"Delivery"). Every failure is an :class:`~tssd.shim.args.HsmExit` with the exit code
dCache acts on.
"""

from __future__ import annotations

import errno
import os
import stat

from tssd.shim.args import (
    EXIT_NO_SPACE,
    EXIT_OTHER,
    EXIT_PERMANENT,
    EXIT_READ,
    EXIT_WRITE,
    HsmExit,
    StorageInfo,
)
from tssd.shim.names import is_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Request = dict[str, Any]

# tssd writes a recall beside its destination under this name; the call that reports the
# recall renames it into place (docs/dcache.md, "Delivery"). Same as tssd.files.
PART_SUFFIX = ".tssd-part"

# Beside ``<path>.crcval``; a stale one is a leftover of a killed call (write_crcval).
CRCVAL_TMP_SUFFIX = ".tss-hsm.tmp"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY


def check_source(path: str, size: int) -> None:
    # O_NONBLOCK: a FIFO must not make this call wait for a writer; O_NOFOLLOW: a pool's
    # replica is never a symlink, so one here was planted.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise HsmExit(EXIT_READ, f"cannot read source {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise HsmExit(EXIT_READ, f"source {path} is not a regular file")
    actual = st.st_size
    if actual != size:
        raise HsmExit(
            EXIT_READ, f"source {path} has {actual} bytes but the storage info says {size}"
        )


def check_destination(path: str) -> None:
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise HsmExit(EXIT_WRITE, f"destination directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise HsmExit(EXIT_WRITE, f"destination directory {directory} is not writable")


def part_path(path: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}{PART_SUFFIX}")


def claim_part(request: Request, path: str) -> None:
    """Rename tssd's part file into place: the file appears only through this call.

    Either this rename or tssd's removal of an unclaimed part file wins; losing means the
    recall was abandoned (exit 1: dCache retries with a new recall). A part file already
    renamed by an earlier call of this stage leaves the file in place (checked next).
    """
    if request.get("delivery") != "claim":
        return
    try:
        os.rename(part_path(path), path)
    except FileNotFoundError:
        if not os.path.lexists(path):
            raise HsmExit(
                EXIT_OTHER,
                f"request {request['id']} finished but its part file is gone "
                "(abandoned: unclaimed for longer than tssd's delivery.claim_timeout_s)",
            ) from None
    except OSError as exc:
        code = EXIT_NO_SPACE if exc.errno == errno.ENOSPC else EXIT_WRITE
        raise HsmExit(code, f"cannot rename the recalled file to {path}: {exc.strerror}") from exc


def finish_recall(request: Request, path: str, si: StorageInfo) -> None:
    size, actual = request.get("size"), request.get("adler32")
    claim_part(request, path)
    check_delivered(request["id"], path, size if type(size) is int else si.size)
    if not isinstance(actual, str) or not is_hex(actual, 8):
        raise HsmExit(EXIT_OTHER, f"request {request['id']} is done but reports no adler32")
    actual = actual.lower().zfill(8)
    if si.adler32 is not None and actual != si.adler32:
        # No .crcval: dCache only reads it after exit 0, so it would be litter in the pool.
        raise HsmExit(
            EXIT_PERMANENT,
            f"adler32 of recalled {path} is {actual} but flag-c says {si.adler32}",
        )
    write_crcval(path, actual)


def check_delivered(request_id: int, path: str, size: int) -> None:
    # The daemon said done, so a missing or short file is its mistake, not the pool disk's:
    # exit 1 lets dCache retry instead of disabling the pool as 43 would.
    try:
        actual = os.stat(path).st_size
    except OSError as exc:
        raise HsmExit(
            EXIT_OTHER, f"request {request_id} is done but {path} is unusable: {exc.strerror}"
        ) from exc
    if actual != size:
        raise HsmExit(
            EXIT_OTHER, f"request {request_id} is done but {path} has {actual} bytes, not {size}"
        )


def write_crcval(path: str, adler32: str) -> None:
    """Write ``<path>.crcval`` through a temporary name, so dCache never reads half of it.

    Every step is relative to the destination directory's fd and follows no symlink: a
    name planted in the pool directory (a symlink at the temporary name) must not make
    this call truncate a file outside. The temporary name is fixed per destination, so
    one that a killed call (SIGKILL: no clean-up runs) left behind is removed by the
    next call of the same stage (unlink removes a symlink, never its target).
    """
    directory, name = os.path.split(path)
    target = name + ".crcval"
    temporary = target + CRCVAL_TMP_SUFFIX
    try:
        dir_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _crcval_error(path, exc) from exc
    try:
        _write_temporary(dir_fd, temporary, (adler32 + "\n").encode("ascii"))
        os.replace(temporary, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:  # SIGTERM (main.Terminated) too: leave no temporary
        try:
            os.unlink(temporary, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _crcval_error(path, exc) from exc
        raise
    finally:
        os.close(dir_fd)


def _write_temporary(dir_fd: int, name: str, data: bytes) -> None:
    try:
        fd = os.open(name, _CREATE, 0o644, dir_fd=dir_fd)
    except FileExistsError:
        os.unlink(name, dir_fd=dir_fd)  # a killed call's leftover, or a planted name
        fd = os.open(name, _CREATE, 0o644, dir_fd=dir_fd)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.EIO, "short write")
    finally:
        os.close(fd)


def _crcval_error(path: str, exc: OSError) -> HsmExit:
    code = EXIT_NO_SPACE if exc.errno == errno.ENOSPC else EXIT_WRITE
    return HsmExit(code, f"cannot write {path}.crcval: {exc.strerror or exc}")

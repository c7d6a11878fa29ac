"""The ENDIT directory protocol, file by file (blocking calls: run them in a thread).

A base directory holds ``request/`` (JSON request files, ``<id>.err`` failure files),
``in/`` (recalled files, delivered by rename), ``out/`` (hardlinks of files to flush) and
``trash/`` (URIs of tape copies to remove). Only names of hex digits (pnfsids) are
protocol files: the temporary names written here start with a dot, so the plugin never
sees them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import zlib
from dataclasses import dataclass
from typing import Any

from tssd.endit.dirs import EnditPaths
from tssd.errors import DestinationUnwritable, NoSpace, SourceUnreadable
from tssd.files import CHUNK_SIZE, TEMP_SUFFIX, adler32_hex
from tssd.shim.names import ADLER32, PNFSID

ERR_SUFFIX = ".err"
RECALL_ACTIONS = frozenset({"recall", None})
PERMANENT_CODES = frozenset({31, 32})
# checksumType as the plugin writes it: dCache's ChecksumType name, lower-cased
# (modules/common/.../org/dcache/util/ChecksumType.java: ADLER32, MD5, MD4, SHA-1, SHA-256,
# SHA-512), to hashlib's name; older spellings kept. adler32 is read on its own path.
HASHES = {
    "md5": "md5",
    "md5_type": "md5",
    "md4": "md4",
    "md4_type": "md4",
    "sha-1": "sha1",
    "sha1": "sha1",
    "sha-256": "sha256",
    "sha256": "sha256",
    "sha-512": "sha512",
    "sha512": "sha512",
}


def hash_for(kind: str) -> str | None:
    """hashlib's name for a checksumType, if this Python can compute it (md4 often not)."""
    name = HASHES.get(kind)
    if name is None:
        return None
    try:
        hashlib.new(name)
    except ValueError:
        return None
    return name


def is_protocol_name(name: str) -> bool:
    return PNFSID.fullmatch(name)


Version = tuple[int, int]  # (inode, mtime_ns): tells an overwritten file from the old one


@dataclass(frozen=True)
class RequestFile:
    """``request/<name>`` as read: ``body`` is None while it is incomplete or unreadable."""

    name: str
    version: Version | None  # None: the file is gone
    body: dict[str, Any] | None = None
    mtime: float = 0.0
    delivered: bool = False  # in/<name> has the requested size already
    has_err: bool = False  # request/<name>.err waits for the plugin
    pool_gone: bool = False  # the pool process that wrote it (parent_pid) has died

    @property
    def gone(self) -> bool:
        return self.version is None

    @property
    def action(self) -> Any:
        return (self.body or {}).get("action")

    @property
    def size(self) -> Any:
        return (self.body or {}).get("file_size")


def read_request(paths: EnditPaths, name: str, check_pid: bool = False) -> RequestFile:
    """``request/<name>``; *check_pid*: also whether its ``parent_pid`` is still running."""
    try:
        fh, st = paths.open_file("request", name)
        with fh:
            raw = fh.read(1 << 20)
    except FileNotFoundError:
        return RequestFile(name, None)
    except OSError:
        return RequestFile(name, (0, 0))
    version = (st.st_ino, st.st_mtime_ns)
    body = _json_object(raw)
    has_err = paths.lstat("request", f"{name}{ERR_SUFFIX}") is not None
    delivered = False
    size = body.get("file_size") if body else None
    if isinstance(size, int):
        inbox = paths.regular("in", name)
        delivered = inbox is not None and inbox.st_size == size
    gone = check_pid and body is not None and not pool_alive(body.get("parent_pid"))
    return RequestFile(name, version, body, st.st_mtime, delivered, has_err, gone)


def pool_alive(pid: Any) -> bool:
    """Whether the process *pid* (a request file's ``parent_pid``) runs on this host.

    As ENDIT's retriever does (``tsmretriever.pl``, ``checkrequest``): no pid, or one
    that is not a positive integer, counts as alive; a pid that exists but is not ours
    to signal is alive too.
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _json_object(raw: bytes) -> dict[str, Any] | None:
    # The plugin writes stage requests in place: a read may catch half of the JSON.
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_requests(
    paths: EnditPaths, names: list[str], check_pid: bool = False
) -> list[RequestFile]:
    return [read_request(paths, n, check_pid) for n in names]


def err_code(code: int) -> int:
    """The return code an ``.err`` file carries for a stage that failed with *code*.

    ENDIT's own retriever writes only a message, which the plugin reads as code 1
    (``EnditException.create``). tssd adds the permanent codes 31 and 32 and writes 1 for
    everything else: 41-43 (and 204) from a stage disable the whole pool (dCache's
    ``PoolV4``), and nothing in ``in/`` is the pool's replica yet.
    """
    return code if code in PERMANENT_CODES else 1


def write_error(paths: EnditPaths, name: str, code: int, message: str) -> None:
    """Write ``request/<name>.err`` atomically: the return code, then a one-line message."""
    code = err_code(code)
    line = " ".join(message.split()) or "failed"
    target = f"{name}{ERR_SUFFIX}"
    data = f"{code}\n{line}\n".encode()
    try:
        paths.write_atomic("request", target, data, temp=f".{target}{TEMP_SUFFIX}")
    except OSError as exc:
        error = NoSpace if exc.errno in (errno.ENOSPC, errno.EDQUOT) else DestinationUnwritable
        where = paths.request / target
        raise error(f"cannot write {where}: {exc.strerror or exc}") from exc


def file_size(paths: EnditPaths, sub: str, name: str) -> int | None:
    """The size of the regular file *sub*/*name*; None if there is none."""
    st = paths.regular(sub, name)
    return st.st_size if st is not None else None


@dataclass(frozen=True)
class OutFile:
    """``out/<name>``, with what the request file says about it."""

    name: str
    size: int
    version: Version
    adler32: str | None
    storage_class: str | None = None


def inspect_out(
    paths: EnditPaths, name: str, body: dict[str, Any] | None
) -> OutFile | SourceUnreadable | None:
    """Size and adler32 of ``out/<name>``, checked against the request file when present.

    An adler32 in the request file is passed on and checked by the backend while it
    writes; any other checksum (or none) costs one read here, which also yields the
    adler32 that lets a re-flushed file be recognised on tape.
    """
    path = paths.out / name
    st = paths.lstat("out", name)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):  # a symlink, FIFO or device is never flushed
        return SourceUnreadable(f"{path} is not a regular file")
    body = body or {}
    expected = body.get("file_size")
    if isinstance(expected, int) and expected != st.st_size:
        return SourceUnreadable(f"{path} has {st.st_size} bytes, the request says {expected}")
    kind = str(body.get("checksumType") or "").lower()
    value = str(body.get("checksumValue") or "").lower()
    version = (st.st_ino, st.st_mtime_ns)
    sc = body.get("storage_class")
    storage_class = sc if isinstance(sc, str) and sc else None
    if kind == "adler32" and ADLER32.fullmatch(value):
        return OutFile(name, st.st_size, version, value.zfill(8), storage_class)
    try:
        adler, digest = _checksums(paths, name, hash_for(kind))
    except OSError as exc:
        return SourceUnreadable(f"cannot read {path}: {exc.strerror or exc}")
    if digest is not None and value and digest != value:
        return SourceUnreadable(f"{path}: {kind} {digest} does not match the request's {value}")
    return OutFile(name, st.st_size, version, adler, storage_class)


def _checksums(paths: EnditPaths, name: str, algorithm: str | None) -> tuple[str, str | None]:
    adler = zlib.adler32(b"")
    digest = hashlib.new(algorithm) if algorithm else None
    fh, _ = paths.open_file("out", name)
    with fh:
        while chunk := fh.read(CHUNK_SIZE):
            adler = zlib.adler32(chunk, adler)
            if digest is not None:
                digest.update(chunk)
    return adler32_hex(adler), digest.hexdigest() if digest is not None else None


def read_trash(paths: EnditPaths, name: str) -> str | None:
    """The URI in ``trash/<name>``; None if it is gone."""
    try:
        fh, _ = paths.open_file("trash", name)
    except OSError:
        # Gone, or a symlink, FIFO or device (never a URI the plugin wrote), or trash/
        # itself refused.
        return None
    with fh:
        return fh.read(1 << 16).decode("utf-8", errors="replace").strip()


def free_bytes(paths: EnditPaths) -> tuple[int, int]:
    """(free bytes for an unprivileged writer, file system size) of ``in/``."""
    st = paths.statvfs("in")
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def split_storage_class(storage_class: str | None) -> tuple[str | None, str | None]:
    """dCache's ``store:group@hsm`` as (store, group)."""
    if not storage_class:
        return None, None
    head = storage_class.split("@", 1)[0]
    store, _, group = head.partition(":")
    return store or None, group or None


def stat_version(paths: EnditPaths, sub: str, name: str) -> Version | None:
    st = paths.lstat(sub, name)
    return (st.st_ino, st.st_mtime_ns) if st is not None else None

"""Reading a catalog CSV named by path on the daemon's host, safely.

Found by attack (docs/reliability.md): ``POST /v1/catalog/import {"path": ...}`` opened a
FIFO on the event loop (the daemon froze until a writer came), read ``/dev/zero`` until
memory ran out, and replaced the catalog with an empty file. The file is now opened
without blocking and without following a symlink, must be a regular file of bounded size
(checked on the descriptor, so nothing can be swapped in between), and is read and
checked in a worker thread.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import stat

from tssd.errors import InvalidRequest

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def read_catalog_file(path: str, max_bytes: int) -> str:
    """The text of the regular file *path*, at most *max_bytes*; InvalidRequest otherwise."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise InvalidRequest(f"cannot open {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidRequest(f"{path} is not a regular file")
        if info.st_size > max_bytes:
            raise InvalidRequest(
                f"{path} has {info.st_size} bytes: more than limits.catalog_import_max_bytes "
                f"({max_bytes})"
            )
        # A regular file may still grow while it is read: never read more than the bound.
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise InvalidRequest(f"{path} grew past limits.catalog_import_max_bytes ({max_bytes})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{path} is not UTF-8 text (byte {exc.start})") from None


def has_rows(text: str) -> bool:
    """Whether a catalog CSV holds at least one row after its header."""
    rows = csv.reader(io.StringIO(text, newline=""))
    next(rows, None)
    return any(any(field.strip() for field in row) for row in rows)


async def catalog_text(body_csv: str | None, path: str | None, max_bytes: int) -> str:
    """The CSV text of an import: given inline, or read from *path* off the event loop."""
    if body_csv is not None:
        return body_csv
    assert path is not None
    return await asyncio.to_thread(read_catalog_file, path, max_bytes)

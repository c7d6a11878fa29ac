"""The simulated library's store after a crash: object files the catalog never recorded.

A write commits the object file, spends the simulated locate and transfer time, then
records the object in ``sim_objects``. A process killed in between leaves a file no
catalog row names: after 21 SIGKILLs, 17 of them (6.8 MB) were orphaned (issue 17 point
10). Such a file cannot be adopted (its pnfsid, volume and position were never recorded
anywhere), so it is removed at start, with one ``sim.objects.orphans`` event counting
them. Interrupted writes' temporary files are removed too.

Only the process holding the data directory's lock tidies it: a second live daemon
configured with the same ``sim.data_dir`` may be between committing a file and recording
it, and its file is no orphan.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog

from tssd.files import TEMP_SUFFIX

log = structlog.get_logger()

#: The lock file in ``sim.data_dir``; held by the daemon that owns the store.
LOCK_NAME = ".lock"


@dataclass(frozen=True)
class Tidied:
    orphans: int = 0
    orphan_bytes: int = 0
    partial: int = 0


def lock_directory(data_dir: Path) -> int | None:
    """An open descriptor holding the exclusive lock on *data_dir*, or None if another
    process holds it. Kept open for the life of the library (closing it unlocks)."""
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _listing(objects: Path) -> tuple[dict[str, int], list[Path]]:
    """Committed object files (name -> size) and temporary files of interrupted writes."""
    files: dict[str, int] = {}
    partial: list[Path] = []
    with os.scandir(objects) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            if entry.name.startswith("."):
                if entry.name.endswith(TEMP_SUFFIX):
                    partial.append(Path(entry.path))
                continue
            files[entry.name] = entry.stat(follow_symlinks=False).st_size
    return files, partial


def _unlink_all(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


async def own_store(
    data_dir: Path, objects: Path, known: Callable[[list[str]], Awaitable[set[str]]]
) -> int | None:
    """Lock *data_dir* and tidy its store; the lock's descriptor, or None if shared."""
    fd = await asyncio.to_thread(lock_directory, data_dir)
    if fd is None:
        log.info("sim.objects.shared", data_dir=str(data_dir))
        return None
    try:
        await tidy_store(objects, known)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def tidy_store(objects: Path, known: Callable[[list[str]], Awaitable[set[str]]]) -> Tidied:
    """Remove from *objects* the files whose names *known* does not return as bfids."""
    files, partial = await asyncio.to_thread(_listing, objects)
    recorded = await known(list(files))
    orphans = sorted(set(files) - recorded)
    await asyncio.to_thread(_unlink_all, [*partial, *(objects / name for name in orphans)])
    tidied = Tidied(len(orphans), sum(files[n] for n in orphans), len(partial))
    if orphans or partial:
        log.warning(
            "sim.objects.orphans",
            removed=tidied.orphans,
            bytes=tidied.orphan_bytes,
            partial=tidied.partial,
            kept=len(files) - len(orphans),
        )
    return tidied

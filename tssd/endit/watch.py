"""File-system hints: which protocol names changed, from inotify.

Events are only hints: the worker reads the file itself to learn what is there, so a
missed, merged or reordered event costs latency, never correctness. A full event queue
(``IN_Q_OVERFLOW``, e.g. 30,000 requests dropped at once) asks for a full rescan, and the
periodic rescan catches everything inotify cannot see (NFS, a watch that failed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from tssd.endit.dirs import EnditPaths
from tssd.endit.protocol import ERR_SUFFIX, is_protocol_name

log = structlog.get_logger()


class Hints:
    """Names seen changing, per subdirectory, and whether a full rescan is wanted."""

    def __init__(self) -> None:
        self.names: dict[str, set[str]] = {"request": set(), "out": set(), "trash": set()}
        self.rescan = False
        self.event = asyncio.Event()

    def add(self, subdir: str, name: str) -> None:
        if name.endswith(ERR_SUFFIX) or not is_protocol_name(name):
            return
        bucket = self.names.get(subdir)
        if bucket is not None:
            bucket.add(name)
            self.event.set()

    def want_rescan(self) -> None:
        self.rescan = True
        self.event.set()

    def drain(self) -> tuple[dict[str, set[str]], bool]:
        names = {k: v for k, v in self.names.items() if v}
        self.names = {k: set() for k in self.names}
        rescan, self.rescan = self.rescan, False
        self.event.clear()
        return names, rescan


async def watch(paths: EnditPaths, hints: Hints) -> None:
    """Feed *hints* from inotify until cancelled; return early if inotify is unusable."""
    try:
        from asyncinotify import Inotify, Mask
    except ImportError as exc:  # pragma: no cover - a dependency of tssd
        log.warning("endit.inotify_unavailable", directory=str(paths.base), error=str(exc))
        return
    changed = Mask.CLOSE_WRITE | Mask.MOVED_TO | Mask.CREATE | Mask.DELETE | Mask.MOVED_FROM
    try:
        inotify = Inotify()
    except OSError as exc:
        log.warning("endit.inotify_unavailable", directory=str(paths.base), error=str(exc))
        return
    with inotify:
        by_path: dict[Path, str] = {}
        for subdir, directory in (
            ("request", paths.request),
            ("out", paths.out),
            ("trash", paths.trash),
        ):
            try:
                # A symlinked subdirectory is not watched (nor ever read: tssd.endit.dirs).
                inotify.add_watch(directory, changed | Mask.ONLYDIR | Mask.DONT_FOLLOW)
            except OSError as exc:
                log.warning("endit.watch_failed", directory=str(directory), error=str(exc))
                continue
            by_path[directory] = subdir
        # Whatever happened before the watches existed is found by the first rescan.
        hints.want_rescan()
        async for event in inotify:
            if Mask.Q_OVERFLOW in event.mask:
                hints.want_rescan()
                continue
            if event.watch is None or event.name is None:
                continue
            where = by_path.get(event.watch.path)
            if where is not None:
                hints.add(where, str(event.name))

"""Disk backpressure: recalls wait while their destination file system is nearly full.

Before a recall session reads a file it asks :meth:`Backpressure.admit`: a file that would
leave its destination file system with less than ``backpressure.min_free_bytes`` or
``backpressure.min_free_percent`` free is not read; the file system is recorded as full
and every recall into it returns to the queue and stays there (the scheduler and the
sessions add :meth:`Backpressure.clauses` to their queries). A pool disk that reports
ENOSPC during a read is recorded the same way, so the request waits instead of failing.
Full file systems are looked at again every ``backpressure.recheck_s``; once one has room
its recalls are served as before. ``tssctl why`` shows the hold (:meth:`held_reason`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from tssd.db.conditions import Condition, paths_outside
from tssd.domain import Kind, Request, State
from tssd.errors import NoSpace
from tssd.metrics import Metrics

log = structlog.get_logger()

#: (free bytes, total bytes) of the file system holding a path.
Probe = Callable[[str], tuple[int, int]]


def statvfs_probe(path: str) -> tuple[int, int]:
    """Free bytes an unprivileged writer may use, and the size of the file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def mount_point(path: str) -> str:
    """The mount point of the file system holding *path* (an existing directory)."""
    current = os.path.realpath(path)
    dev = os.stat(current).st_dev
    while current != "/":
        parent = os.path.dirname(current)
        if os.stat(parent).st_dev != dev:
            break
        current = parent
    return current


@dataclass
class FullFs:
    mount: str
    free: int
    total: int
    since: float
    #: Size of the smallest recall that did not fit: released once it would.
    need: int = 0


class Backpressure:
    """Which destination file systems are too full to take recalls, and since when."""

    def __init__(
        self,
        *,
        min_free_bytes: int = 0,
        min_free_percent: float = 0.0,
        recheck_s: float = 10.0,
        metrics: Metrics | None = None,
        probe: Probe = statvfs_probe,
        on_release: Callable[[], None] | None = None,
    ) -> None:
        self.min_free_bytes = min_free_bytes
        self.min_free_percent = min_free_percent
        self.recheck_s = recheck_s
        self.metrics = metrics
        self.probe = probe
        self.on_release = on_release
        self.full: dict[str, FullFs] = {}
        self._mounts: dict[str, str] = {}
        self._checked = 0.0

    @property
    def active(self) -> bool:
        return self.min_free_bytes > 0 or self.min_free_percent > 0

    def _enough(self, free: int, total: int) -> bool:
        if free < self.min_free_bytes:
            return False
        return not (total > 0 and free * 100.0 / total < self.min_free_percent)

    def _mount_of(self, path: str) -> str | None:
        directory = os.path.dirname(path)
        if directory not in self._mounts:
            try:
                self._mounts[directory] = mount_point(directory)
            except OSError:
                return None  # the sink reports a missing directory; not our business
        return self._mounts[directory]

    def admit(self, requests: Sequence[Request]) -> tuple[list[Request], list[Request]]:
        """Split recalls into those that fit on their file systems and those that wait."""
        admitted: list[Request] = []
        held: list[Request] = []
        planned: dict[str, int] = {}
        for request in requests:
            mount = self._mount_of(request.path or "") if self.active and request.path else None
            if mount is None:
                admitted.append(request)
                continue
            if mount in self.full:
                held.append(request)
                continue
            try:
                free, total = self.probe(mount)
            except OSError:
                admitted.append(request)
                continue
            need = planned.get(mount, 0) + (request.size or 0)
            if self._enough(free - need, total):
                planned[mount] = need
                admitted.append(request)
            else:
                self._hold(mount, free, total, request)
                held.append(request)
        return admitted, held

    def absorbs(self, request: Request, error: BaseException) -> bool:
        """Whether *error* (ENOSPC while writing *request*) makes it wait, not fail."""
        if not isinstance(error, NoSpace) or not request.path:
            return False
        mount = self._mount_of(request.path)
        if mount is None:
            return False
        try:
            free, total = self.probe(mount)
        except OSError:
            free, total = 0, 0
        self._hold(mount, free, total, request)
        return True

    def _hold(self, mount: str, free: int, total: int, request: Request) -> None:
        if mount not in self.full:
            log.warning(
                "backpressure.hold", mount=mount, free=free, total=total,
                request_id=request.id, pnfsid=request.pnfsid, path=request.path,
            )  # fmt: skip
        size = request.size or 0
        known = self.full.get(mount)
        need = min(size, known.need) if known is not None else size
        self.full[mount] = FullFs(mount, free, total, time.monotonic(), need)
        self._gauge()

    def recheck(self, *, force: bool = False) -> list[str]:
        """Release the file systems that have room again; return their mount points."""
        now = time.monotonic()
        if not self.full or (not force and now - self._checked < self.recheck_s):
            return []
        self._checked = now
        released = []
        for mount, entry in list(self.full.items()):
            try:
                free, total = self.probe(mount)
            except OSError:
                continue
            entry.free, entry.total = free, total
            if self._enough(free - entry.need, total):
                del self.full[mount]
                released.append(mount)
                log.info("backpressure.release", mount=mount, free=free, total=total)
        if released:
            self._gauge()
            if self.on_release is not None:
                self.on_release()
        return released

    def held_prefixes(self) -> list[str]:
        """Path prefixes of the file systems too full for recalls (after a recheck)."""
        self.recheck()
        return [_prefix(m) for m in self.full]

    def clauses(self) -> list[Condition]:
        """WHERE conditions leaving out recalls into full file systems (after a recheck)."""
        return paths_outside(self.held_prefixes())

    def held_reason(self, request: Any) -> str | None:
        """Why a queued recall waits for disk space, or None (for ``tssctl why``)."""
        if getattr(request, "kind", None) != Kind.RECALL or not self.full:
            return None
        if getattr(request, "state", None) not in (State.QUEUED, State.QUEUED.value):
            return None
        path = getattr(request, "path", None) or ""
        for mount, entry in self.full.items():
            if path.startswith(_prefix(mount)):
                return (
                    f"destination file system {mount} is nearly full ({entry.free} of "
                    f"{entry.total} bytes free; needs {self.min_free_bytes} bytes and "
                    f"{self.min_free_percent:g} % free): recalls into it wait"
                )
        return None

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.recalls_held.set(len(self.full))


def _prefix(mount: str) -> str:
    return mount if mount.endswith("/") else mount + "/"

"""Delivery of recalled files to pool disk, and the bound on unclaimed part files.

A recall submitted by ``tss-hsm`` (``delivery = "claim"``) is written to
``.<name>.tssd-part`` beside its destination and stays there: the pool's next call (the
poll, or the waiting block-mode script), which runs as the pool's user, renames it into
place and writes ``.crcval``. So the file appears at its path only through a call of the
pool, never after dCache has given up on the stage (deadline, admin cancel, pool
shutdown: dCache then deletes the replica and may stage it again, docs/dcache.md).

:class:`Reaper` removes a part file that no call claimed within
``delivery.claim_timeout_s`` and ends its request ``abandoned``. The race between the
reaper and a late claim is settled by the file system: whoever removes the part file
first (``unlink`` here, ``rename`` in tss-hsm) wins, the other sees ``ENOENT``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import timedelta
from pathlib import Path

import structlog

from tssd.backends.base import Sink, Source
from tssd.background import running
from tssd.clock import utcnow
from tssd.config import Settings
from tssd.db.engine import DatabaseError
from tssd.db.interface import RequestStoreInterface
from tssd.domain import Request
from tssd.errors import TssdError
from tssd.files import (
    FileSink,
    FileSource,
    PoolRoots,
    effective_roots,
    temp_path_for,
    unlink_confined,
)
from tssd.metrics import Metrics
from tssd.ports.history import RequestHistory
from tssd.safepath import HeldRoots

log = structlog.get_logger()
CLAIM = "claim"
ABANDONED_REASON = "abandoned"


def file_roots(settings: Settings) -> tuple[str, ...]:
    """Where a daemon's sinks and sources may lie: the pool roots and the ENDIT directories
    (the operator's own configuration: in/ and out/ are roots), as configured."""
    pools = effective_roots(settings.api.pool_roots, settings.home_path)
    endit = tuple(d.path for d in settings.endit.directories)
    return tuple(dict.fromkeys((*PoolRoots.from_setting(pools).configured, *endit)))


class FileMovers:
    """The sinks and sources of a daemon, confined to its pool roots (tssd.safepath).

    The roots are held open from start (:class:`~tssd.safepath.HeldRoots`): given
    *roots*, those the daemon holds; else its own, closed by :meth:`close`.
    """

    def __init__(
        self, settings: Settings, store: RequestStoreInterface | None = None,
        roots: HeldRoots | None = None,
    ) -> None:  # fmt: skip
        self.store = store
        self._own = roots is None
        self.roots = HeldRoots(file_roots(settings)) if roots is None else roots
        self.op_timeout_s = settings.delivery.op_timeout_s

    def close(self) -> None:
        if self._own:
            self.roots.close()

    def sink(self, request: Request) -> Sink:
        # A recall with a checksum (dCache's flag-c) commits nothing else (tssd.files).
        expected = request.checksum if request.kind == "recall" else None
        return FileSink(
            request.path or "", self.roots, claim=request.delivery == CLAIM,
            op_timeout_s=self.op_timeout_s, expected_adler32=expected,
        )  # fmt: skip

    def source(self, request: Request) -> Source:
        store, request_id = self.store, request.id
        return FileSource(
            request.path or "", request.size or 0, self.roots, op_timeout_s=self.op_timeout_s,
            watch=(lambda: watching(store, request_id)) if store is not None else None,
        )  # fmt: skip


@contextmanager
def watching(store: RequestStoreInterface, request_id: int) -> Iterator[asyncio.Event]:
    """An event set when *request_id* finishes or is cancelled, for the ``with`` block."""
    event = store.notifier.watch(request_id)
    try:
        yield event
    finally:
        store.notifier.unwatch(request_id, event)


class Reaper:
    """Ends recalls whose part file waited longer than the claim bound (module docstring)."""

    def __init__(
        self,
        store: RequestStoreInterface,
        history: RequestHistory,
        movers: FileMovers,
        metrics: Metrics,
        claim_timeout_s: float,
    ) -> None:
        self.store = store
        self.history = history
        self.movers = movers
        self.metrics = metrics
        self.claim_timeout_s = claim_timeout_s

    @property
    def every_s(self) -> float:
        return max(0.2, min(30.0, self.claim_timeout_s / 4))

    async def run(self) -> None:
        while True:
            try:
                await self.sweep()
            except DatabaseError as exc:  # the next sweep tries again
                log.warning("delivery.sweep_failed", error=str(exc))
            await asyncio.sleep(self.every_s)

    async def sweep(self) -> int:
        """One pass; the number of requests abandoned."""
        cutoff = utcnow() - timedelta(seconds=self.claim_timeout_s)
        rows = await self.history.unclaimed_recalls(CLAIM, cutoff, limit=1000)
        abandoned = 0
        for row in rows:
            abandoned += await self._settle(row.id, row.path or "", row.pnfsid, row.queue)
        return abandoned

    async def _settle(self, request_id: int, path: str, pnfsid: str | None, queue: str) -> int:
        part = temp_path_for(Path(path))
        try:
            removed = await asyncio.wait_for(
                asyncio.to_thread(unlink_confined, part, part.name, self.movers.roots),
                self.movers.op_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            log.warning("delivery.unlink_failed", request_id=request_id, path=str(part),
                        error=str(exc))  # fmt: skip
            removed = True  # cannot be claimed through an unusable directory either
        if not removed:
            # A call renamed it (and is about to say so), or it was never there: settled.
            with suppress(DatabaseError, TssdError):
                await self.store.mark_reported(request_id)
            return 0
        reason = f"no pool call claimed the file within {self.claim_timeout_s:g} s; part removed"
        moved = await self.store.abandon([request_id], ABANDONED_REASON, error=reason)
        if moved:
            self.metrics.recalls_abandoned_total.inc()
            log.warning("delivery.abandoned", request_id=request_id, pnfsid=pnfsid, queue=queue,
                        path=path, claim_timeout_s=self.claim_timeout_s)  # fmt: skip
        return len(moved)


@asynccontextmanager
async def reaper(
    settings: Settings,
    store: RequestStoreInterface,
    history: RequestHistory,
    metrics: Metrics,
    roots: HeldRoots | None = None,
) -> AsyncIterator[Reaper]:
    """Run the :class:`Reaper` for the duration of the ``async with`` block."""
    movers = FileMovers(settings, roots=roots)
    job = Reaper(store, history, movers, metrics, settings.delivery.claim_timeout_s)
    try:
        async with running(job.run(), "delivery-reaper"):
            yield job
    finally:
        movers.close()

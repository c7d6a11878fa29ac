"""One ENDIT directory: react to hints, reconcile with the database, act on outcomes.

Each pass handles the names inotify reported, then the requests that finished (the
store's notifier says which), then the grace-period cancels and the stages waiting for
space. Every ``endit.rescan_s`` (and at start-up, and when inotify's queue overflowed) a
full pass lists the directory and the directory's open requests in the database (all of
them at start-up and after an overflow, later those with request events since the last
pass), so that nothing depends on an event having been seen: after a tssd restart,
recalls whose request file is gone are cancelled (after the grace period) and files in
``out/`` that were never recorded are taken.

Which requests belong to a directory is derived from their path: a recall writes
``<dir>/in/<id>``, a migration reads ``<dir>/out/<id>``, a removal names
``<dir>/trash/<id>``. No schema change is needed, and ``tssctl requests`` shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable

import structlog

from tssd.backends.base import TapeBackend
from tssd.domain import TERMINAL_STATES, Kind, Request, State
from tssd.endit import protocol
from tssd.endit.context import DirContext, Watches, in_thread
from tssd.endit.flush import FlushBook
from tssd.endit.protocol import RequestFile
from tssd.endit.remove import RemoveBook
from tssd.endit.stage import Stage, StageBook
from tssd.endit.watch import Hints, watch
from tssd.retry import Retrier

log = structlog.get_logger()

PASS_S = 0.2  # longest pause between passes: finished requests are acted on this fast
INVALID_AFTER_S = 60.0  # a request file still not valid JSON after this long is refused


class DirectoryWorker:
    def __init__(self, ctx: DirContext, backend: TapeBackend, retrier: Retrier) -> None:
        self.ctx = ctx
        self.hints = Hints()
        self.watches = Watches(ctx.store)
        self.stages = StageBook(ctx, self.watches)
        self.flushes = FlushBook(ctx, self.watches)
        self.removes = RemoveBook(ctx, backend, retrier)
        self.unparsed: dict[str, float] = {}  # request files not yet valid JSON: first seen
        #: request_events ids _adopt_open has read up to (None: no full pass yet), and the
        #: highest id its last pass saw (the next pass reads from the former).
        self._events_seen: int | None = None
        self._events_next = 0

    @property
    def directory(self) -> str:
        return str(self.ctx.paths.base)

    async def run(self) -> None:
        """Serve the directory until cancelled."""
        missing = await in_thread(self.ctx.paths.missing)
        if missing:
            log.warning(
                "endit.missing_dirs", directory=self.directory, missing=[str(m) for m in missing]
            )
        watcher = None
        if self.ctx.settings.inotify:
            watcher = asyncio.create_task(watch(self.ctx.paths, self.hints), name="endit-watch")
        log.info("endit.started", directory=self.directory, hsm_name=self.ctx.directory.hsm_name)
        try:
            await self._loop()
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            self.watches.close()

    async def _loop(self) -> None:
        next_full = 0.0
        while True:
            names, rescan = self.hints.drain()
            try:
                if rescan or time.monotonic() >= next_full:
                    next_full = time.monotonic() + self.ctx.settings.rescan_s
                    await self.reconcile(full=rescan)
                else:
                    await self.handle(names)
                await self.after()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A failing pass (database down, ...) is retried by the next full rescan.
                log.exception("endit.pass_failed", directory=self.directory)
                next_full = min(next_full, time.monotonic() + 5.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.hints.event.wait(), timeout=PASS_S)

    # -- passes -----------------------------------------------------------------------

    async def handle(self, names: dict[str, set[str]]) -> None:
        """React to the names that changed."""
        request = names.get("request", set()) | set(self.unparsed)
        out = names.get("out", set())
        if request:
            out |= await self._requests(sorted(request))
        await self.flushes.take(out)
        await self.removes.take(names.get("trash", set()))

    async def after(self) -> None:
        """Outcomes, grace-period cancels, stages waiting for space or a batch."""
        finished = self.watches.finished()
        if finished:
            await self._finished(finished)
        await self.stages.expire()
        await self.stages.submit()

    async def reconcile(self, full: bool = False) -> None:
        """Full pass: the database's open requests of this directory, then every file.

        *full*: read every open request again, not only those changed since the last pass.
        """
        await self._adopt_open(full)
        paths = self.ctx.paths
        found = await in_thread(
            lambda: {s: paths.listing(s) for s in ("request", "out", "trash", "in")}
        )
        # A subdirectory that cannot be read (absent, refused) says nothing about its files.
        listing = {s: f.files for s, f in found.items() if f is not None}
        inbox = listing.pop("in", None)
        request = listing.get("request")
        if request is not None:
            self.stages.absent(request)
            if inbox is not None:
                self.stages.strays(inbox - request)
        if "out" in listing:
            await self.flushes.vanished(listing["out"])
        await self.handle(listing)

    async def _adopt_open(self, full: bool = False) -> None:
        """Adopt this directory's open requests tssd does not track yet, and act on tracked
        ones that finished unheard. Only the first pass (and one after an inotify overflow)
        reads every open request of the directory; later passes read the request events
        since the last pass: a walk of a million open requests every ``rescan_s`` cost
        seconds of the event loop (issue 22)."""
        if full or self._events_seen is None:
            await self._adopt_all()
            return
        events = await self.ctx.history.events_after(self._events_seen)
        # The next pass reads this pass's window again: a transaction that took its event
        # ids before this pass but committed after it is still seen (adopting is idempotent).
        self._events_seen = self._events_next
        self._events_next = max((e.id for e in events), default=self._events_next)
        reopened = sorted({e.request_id for e in events if e.to_state == State.QUEUED})
        ended = {e.request_id for e in events if e.to_state in TERMINAL_STATES}
        if reopened:
            self._adopt(await self.ctx.history.open_transfers_under(self._base(), reopened))
        missed = [i for i in (*self.stages.by_id, *self.flushes.by_id) if i in ended]
        if missed:
            await self._finished(missed)

    async def _adopt_all(self) -> None:
        # Events from here on are the next pass's: read before the open requests.
        seen = await self.ctx.history.last_event_id()
        rows = await self.ctx.history.open_transfers_under(self._base())
        self._events_seen = self._events_next = seen
        self._adopt(rows)
        open_ids = {row.id for row in rows}
        # Finished without this process hearing of it (another daemon, a race).
        missed = [i for i in (*self.stages.by_id, *self.flushes.by_id) if i not in open_ids]
        if missed:
            await self._finished(missed)

    def _base(self) -> str:
        """This directory, as the prefix of the paths of its requests."""
        return str(self.ctx.paths.base).rstrip("/") + "/"

    def _adopt(self, rows: Iterable[Request]) -> None:
        for row in rows:
            name = self._name_in(row, "in" if row.kind == Kind.RECALL else "out")
            if name is None:
                continue
            if row.kind == Kind.RECALL:
                self.stages.adopt(row, name)
            else:
                self.flushes.adopt(row, name)

    def _name_in(self, row: Request, subdir: str) -> str | None:
        path = row.path or ""
        parent, _, name = path.rpartition("/")
        if parent != str(self.ctx.paths.base / subdir) or not protocol.is_protocol_name(name):
            return None
        return name

    async def _finished(self, ids: list[int]) -> None:
        rows = await self.ctx.rows(ids)
        await self.stages.finished(rows)
        again = await self.flushes.finished(rows)
        if again:
            await self.flushes.take(set(again))

    async def _requests(self, names: list[str]) -> set[str]:
        """Read request files; stages go to the stage book. Returns flush names."""
        check_pid = self.ctx.settings.check_parent_pid
        files = await in_thread(protocol.read_requests, self.ctx.paths, names, check_pid)
        flushes: set[str] = set()
        now = time.time()
        for rf in files:
            if rf.gone:
                self.unparsed.pop(rf.name, None)
                self.stages.gone(rf.name)
            elif rf.body is None:
                await self._unparsed(rf, now)
            elif rf.action == "migrate":
                self.unparsed.pop(rf.name, None)
                flushes.add(rf.name)
            elif rf.action in protocol.RECALL_ACTIONS and rf.pool_gone:
                self.unparsed.pop(rf.name, None)
                await self._drop(rf)
            elif rf.action in protocol.RECALL_ACTIONS:
                self.unparsed.pop(rf.name, None)
                self.stages.seen(rf)
            else:
                self.unparsed.pop(rf.name, None)
                log.warning(
                    "endit.unknown_action",
                    directory=self.directory,
                    pnfsid=rf.name,
                    action=rf.action,
                )
        return flushes

    async def _drop(self, rf: RequestFile) -> None:
        """A stage whose pool process has died: nobody will take its file. As ENDIT's
        retriever does, the request file is deleted; a recall already running for it is
        then cancelled like any withdrawn stage."""
        removed = await in_thread(self._unlink_request, rf.name)
        self.stages.gone(rf.name)
        if removed:
            self.ctx.count("stages_dropped")
            log.warning(
                "endit.stage_dropped",
                directory=self.directory,
                pnfsid=rf.name,
                parent_pid=(rf.body or {}).get("parent_pid"),
            )

    def _unlink_request(self, name: str) -> bool:
        try:
            return self.ctx.paths.unlink("request", name)
        except OSError:
            return False

    async def _unparsed(self, rf: RequestFile, now: float) -> None:
        # Being written (the plugin does not write stage requests atomically): read again
        # on the next pass. Still broken long after its last change: refuse it.
        first = self.unparsed.setdefault(rf.name, now)
        if now - max(first, rf.mtime) < INVALID_AFTER_S:
            return
        del self.unparsed[rf.name]
        if not rf.has_err and self.stages.reported.get(rf.name, ()) != rf.version:
            stage = Stage(rf.name, 0, rf.version, rf.mtime)
            self.stages.rejected.append((stage, 32, "request file is not a JSON object"))

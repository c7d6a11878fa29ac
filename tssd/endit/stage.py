"""Stages: ``request/<id>`` (action recall) becomes a recall that writes ``in/<id>``.

One recall per request file, whatever happens to the file: an overwrite (a dCache retry)
keeps the recall; a deletion cancels it only after ``endit.cancel_grace_s``, so that a pool
restart, which wipes ``request/`` and then re-issues its stages, finds its recalls still
running. A failure is written to ``request/<id>.err`` once per version of the request
file; the plugin deletes both and dCache retries with a new file.

Free space: a stage is recorded only while ``in/``'s file system keeps the configured
reserve after every recorded, undelivered stage of this directory is written; the rest
wait in the directory until space returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from tssd.domain import Kind, Request, State
from tssd.endit import protocol
from tssd.endit.context import DirContext, RequestBook, Watches, in_thread
from tssd.endit.protocol import RequestFile, Version
from tssd.errors import InvalidRequest, TssdError
from tssd.submit import SubmitSpec, parse_submit

log = structlog.get_logger()


@dataclass
class Stage:
    name: str
    size: int
    version: Version | None
    mtime: float = 0.0
    storage_class: str | None = None
    request_id: int | None = None
    foreign: bool = False  # attached to a recall that writes elsewhere (e.g. tss-hsm get)
    gone_since: float | None = None


class StageBook(RequestBook[Stage]):
    def __init__(
        self, ctx: DirContext, watches: Watches, now: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ctx, watches, now)
        self.waiting: dict[str, Stage] = {}
        self.rejected: list[tuple[Stage, int, str]] = []
        self.reported: dict[str, Version | None] = {}
        # Delivered after the request file went: name -> when it went. Kept for
        # endit.orphan_grace_s (the plugin moves a file it found complete 1 s after it
        # deleted the request file), then unlinked: a cancelled stage leaves no file.
        self.orphans: dict[str, float] = {}
        # Delivered while the request file was still there: if it goes before the plugin
        # takes the file (a cancel that crossed the delivery), the file becomes an orphan.
        self.delivered: set[str] = set()
        self.outstanding = 0  # bytes recorded for in/ and not yet delivered
        self.paused = False

    def path_of(self, name: str) -> str:
        return str(self.ctx.paths.inbox / name)

    # -- what the directory shows -----------------------------------------------------

    def seen(self, rf: RequestFile) -> None:
        """A recall request file is there (new, rewritten or unchanged)."""
        self.orphans.pop(rf.name, None)
        if rf.has_err:
            return  # the plugin has a failure to collect first
        stage = self.tracked.get(rf.name)
        if stage is not None:
            stage.gone_since, stage.version = None, rf.version
            return
        if rf.delivered or self.reported.get(rf.name, ()) == rf.version:
            self.waiting.pop(rf.name, None)
            return
        body = rf.body or {}
        storage_class = body.get("storage_class")
        stage = Stage(
            rf.name,
            0,
            rf.version,
            rf.mtime,
            storage_class if isinstance(storage_class, str) else None,
        )
        size = rf.size
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            self.rejected.append((stage, 32, f"invalid file_size {size!r} in request file"))
            return
        stage.size = size
        self.waiting[rf.name] = stage

    def gone(self, name: str) -> None:
        """``request/<name>`` is gone: delivered, cancelled, or wiped by a pool restart."""
        self.waiting.pop(name, None)
        self.reported.pop(name, None)
        if name in self.delivered:
            self.delivered.discard(name)
            self.orphans[name] = self.now()
        stage = self.tracked.get(name)
        if stage is not None and stage.gone_since is None:
            stage.gone_since = self.now()

    def absent(self, present: set[str]) -> None:
        """Full rescan: every tracked or waiting name not in *present* is gone."""
        for name in [n for n in (*self.tracked, *self.waiting) if n not in present]:
            self.gone(name)

    def strays(self, names: set[str]) -> None:
        """Files in ``in/`` without a request file: orphans, even ones from before a restart.

        Removed when their request file stays away for ``endit.orphan_grace_s`` (a stage
        dCache cancelled leaves nothing in ``in/``); a stage re-issued before takes them.
        """
        for name in names:
            if name not in self.tracked and name not in self.waiting:
                self.orphans.setdefault(name, self.now())

    def adopt(self, row: Request, name: str) -> None:
        """An open recall of this directory found in the database (after a restart)."""
        if name in self.tracked:
            return
        stage = Stage(name, row.size or 0, None, request_id=row.id)
        self._track(stage, row)

    # -- recording --------------------------------------------------------------------

    async def submit(self) -> int:
        """Record the waiting stages that fit in ``in/``; return how many were recorded."""
        for stage, code, message in self.rejected:
            await self._report(stage, code, message)
        self.rejected = []
        admitted = await self._admit()
        recorded = 0
        batch = max(1, self.ctx.settings.batch)
        for i in range(0, len(admitted), batch):
            recorded += await self._submit_chunk(admitted[i : i + batch])
        return recorded

    async def _submit_chunk(self, stages: list[Stage]) -> int:
        specs: list[SubmitSpec] = []
        valid: list[Stage] = []
        for stage in stages:
            try:
                specs.append(parse_submit(self._body(stage)))
            except InvalidRequest as exc:
                self.waiting.pop(stage.name, None)
                await self._report(stage, exc.exit_code, str(exc))
                continue
            valid.append(stage)
        if not specs:
            return 0
        results = await self.ctx.store.submit(specs)
        for stage, (_created, row) in zip(valid, results, strict=True):
            self.waiting.pop(stage.name, None)
            self._track(stage, row)
        created = sum(1 for c, _ in results if c)
        self.ctx.count("requests_seen", created, action="recall")
        log.info(
            "endit.stages_recorded", directory=self.directory, count=len(specs), created=created
        )
        return len(specs)

    def _body(self, stage: Stage) -> dict[str, Any]:
        return {
            "kind": Kind.RECALL.value,
            "pnfsid": stage.name,
            "path": self.path_of(stage.name),
            "size": stage.size,
            "storage_class": stage.storage_class,
            **self.ctx.common(),
        }

    def _track(self, item: Stage, row: Request) -> None:
        super()._track(item, row)
        if not item.foreign:
            self.outstanding += item.size

    def _forget(self, item: Stage) -> None:
        super()._forget(item)
        if not item.foreign:
            self.outstanding = max(0, self.outstanding - item.size)

    async def _admit(self) -> list[Stage]:
        if not self.waiting:
            return []
        s = self.ctx.settings
        try:
            free, total = await in_thread(protocol.free_bytes, self.ctx.paths)
        except OSError as exc:
            log.warning("endit.statvfs_failed", directory=self.directory, error=str(exc))
            return []
        reserve = max(s.min_free_bytes, int(total * s.min_free_percent / 100))
        budget = free - reserve - self.outstanding
        admitted: list[Stage] = []
        # Oldest first, and strictly in order: a big file is not starved by small ones.
        for stage in sorted(self.waiting.values(), key=lambda st: (st.mtime, st.name)):
            if stage.size > budget:
                break
            budget -= stage.size
            admitted.append(stage)
        held = len(self.waiting) - len(admitted)
        if held and not self.paused:
            log.warning(
                "endit.stage_paused",
                directory=self.directory,
                waiting=held,
                free_bytes=free,
                reserve_bytes=reserve,
                outstanding_bytes=self.outstanding,
            )
        elif not held and self.paused:
            log.info("endit.stage_resumed", directory=self.directory, free_bytes=free)
        self.paused = bool(held)
        self.ctx.gauge("stages_paused", held)
        return admitted

    # -- outcomes ---------------------------------------------------------------------

    async def expire(self) -> int:
        """Cancel recalls whose request file has been gone for the grace period."""
        now = self.now()
        orphan_grace = self.ctx.settings.orphan_grace_s
        stale = [n for n, t in self.orphans.items() if now - t >= orphan_grace]
        if stale:
            await in_thread(self._drop_orphans, stale)
        grace = self.ctx.settings.cancel_grace_s
        due = [
            s
            for s in self.tracked.values()
            if s.gone_since is not None and now - s.gone_since >= grace
        ]
        if not due:
            return 0
        ours = [s.request_id for s in due if not s.foreign and s.request_id is not None]
        reason = "endit request file withdrawn"
        moved = await self.ctx.store.cancel(ours, reason)
        for stage in due:
            self._forget(stage)
        if moved:
            log.info("endit.stages_cancelled", directory=self.directory, count=len(moved))
        return len(moved)

    def _drop_orphans(self, names: list[str]) -> None:
        paths = self.ctx.paths
        for name in names:
            del self.orphans[name]
            try:
                # Still no request file: nobody will take it (a cancelled stage).
                if paths.exists("request", name) or not paths.unlink("in", name):
                    continue
            except OSError as exc:  # request/ or in/ refused or unreadable: next time
                log.warning(
                    "endit.orphan_remove_failed",
                    directory=self.directory,
                    pnfsid=name,
                    error=str(exc),
                )
                continue
            log.info("endit.orphan_removed", directory=self.directory, pnfsid=name)

    async def finished(self, rows: list[Request]) -> None:
        for stage, row in self._closed(rows):
            await self._outcome(stage, row)

    async def _outcome(self, stage: Stage, row: Request) -> None:
        fields = {"directory": self.directory, "pnfsid": stage.name, "request_id": row.id}
        present = stage.gone_since is None
        if row.state == State.DONE and stage.foreign:
            if present:  # the data went elsewhere: recall again, into in/
                self.waiting[stage.name] = Stage(
                    stage.name, stage.size, stage.version, stage.mtime, stage.storage_class
                )
            return
        if row.state == State.DONE:
            if not present and stage.gone_since is not None:
                self.orphans[stage.name] = stage.gone_since
            else:
                self.delivered.add(stage.name)
            await self._check_delivered(stage, row, fields)
            return
        if not present:
            return
        code = row.error_code or 1
        message = row.error or f"recall {row.state}"
        await self._report(stage, code, message)

    async def _check_delivered(self, stage: Stage, row: Request, fields: dict[str, Any]) -> None:
        paths = self.ctx.paths
        actual = await in_thread(protocol.file_size, paths, "in", stage.name)
        # None: the plugin has taken it already.
        if actual is None or actual == stage.size:
            self.ctx.count("stages_delivered")
            log.info("endit.staged", bytes=row.size, **fields)
            return
        await in_thread(paths.unlink, "in", stage.name)
        message = f"tape copy has {actual} bytes, the request {stage.size}"
        await self._report(stage, 1, message)

    async def _report(self, stage: Stage, code: int, message: str) -> None:
        fields = {"directory": self.directory, "pnfsid": stage.name}
        try:
            await in_thread(protocol.write_error, self.ctx.paths, stage.name, code, message)
        except TssdError as exc:
            log.error("endit.err_write_failed", error=str(exc), **fields)
            return
        self.reported[stage.name] = stage.version
        self.ctx.count("errors_written", code=str(protocol.err_code(code)))
        log.warning("endit.stage_failed", error_code=code, error=message, **fields)

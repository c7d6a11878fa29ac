"""Flushes: ``out/<id>`` becomes a migration; the file is unlinked once it is on tape.

Unlinking ``out/<id>`` is the plugin's only success signal, so it happens only after the
migration is done (the copy written and recorded). There is no error channel: a failed
flush keeps its file, is logged, and is submitted again after ``endit.flush_retry_s``
(never for exit codes 30-39, which dCache treats as "do not retry", until the file
changes). A file that re-appears after its flush finished becomes a new migration that
the scheduler completes without writing when tape has a copy with the same size and
adler32.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from tssd.config.storage_classes import StorageClassRefused, check_admitted
from tssd.domain import Kind, Request, State
from tssd.endit import protocol
from tssd.endit.context import DirContext, RequestBook, Watches, in_thread
from tssd.endit.protocol import OutFile, Version
from tssd.errors import InvalidRequest, SourceUnreadable
from tssd.submit import SubmitSpec, parse_submit

log = structlog.get_logger()


@dataclass
class Flush:
    name: str
    size: int
    adler32: str | None
    version: Version | None
    request_id: int | None = None
    foreign: bool = False  # attached to a migration of another file path


class FlushBook(RequestBook[Flush]):
    def __init__(
        self, ctx: DirContext, watches: Watches, now: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ctx, watches, now)
        # Files not to submit again before a time, unless they change: name -> (version, t).
        self.held: dict[str, tuple[Version | None, float]] = {}

    def path_of(self, name: str) -> str:
        return str(self.ctx.paths.out / name)

    def adopt(self, row: Request, name: str) -> None:
        self.held.pop(name, None)  # e.g. retried by an operator
        if name not in self.tracked:
            self._track(Flush(name, row.size or 0, row.checksum, None), row)

    async def take(self, names: set[str]) -> int:
        """Record migrations for the files in ``out/`` among *names*; return how many."""
        candidates = sorted(n for n in names if n not in self.tracked)
        if not candidates:
            return 0
        inspected = await in_thread(self._inspect, candidates, dict(self.held), self.now())
        specs: list[SubmitSpec] = []
        files: list[OutFile] = []
        for name, found in inspected:
            if isinstance(found, SourceUnreadable):
                self._hold(name, None, self.ctx.settings.flush_retry_s, str(found))
                continue
            try:
                spec = parse_submit(self._body(found))
                check_admitted(self.ctx.storage_classes, spec.storage_class or "")
            except (InvalidRequest, StorageClassRefused) as exc:
                # The flush stays pending in out/ (ENDIT has no error channel) until the
                # file changes or the configuration admits its class (a restart).
                self._hold(name, found.version, math.inf, str(exc))
                continue
            specs.append(spec)
            files.append(found)
        recorded = 0
        batch = max(1, self.ctx.settings.batch)
        for i in range(0, len(specs), batch):
            results = await self.ctx.store.submit(specs[i : i + batch])
            for f, (created, row) in zip(files[i : i + batch], results, strict=True):
                self.held.pop(f.name, None)
                self._track(Flush(f.name, f.size, f.adler32, f.version), row)
                self.ctx.count("requests_seen", int(created), action="migrate")
            recorded += len(results)
        if recorded:
            log.info("endit.flushes_recorded", directory=self.directory, count=recorded)
        return recorded

    def _inspect(
        self, names: list[str], held: dict[str, tuple[Version | None, float]], now: float
    ) -> list[tuple[str, OutFile | SourceUnreadable]]:
        found: list[tuple[str, OutFile | SourceUnreadable]] = []
        paths = self.ctx.paths
        for name in names:
            if name in held:
                version, until = held[name]
                st = protocol.stat_version(paths, "out", name)
                if now < until and (version is None or st == version):
                    continue
            rf = protocol.read_request(paths, name)
            body = rf.body if rf.action == "migrate" else None
            out = protocol.inspect_out(paths, name, body)
            if out is not None:
                found.append((name, out))
        return found

    def _body(self, out: OutFile) -> dict[str, Any]:
        storage_class = out.storage_class or self.ctx.directory.storage_class
        store, group = protocol.split_storage_class(storage_class)
        return {
            "kind": Kind.MIGRATE.value,
            "pnfsid": out.name,
            "path": self.path_of(out.name),
            "size": out.size,
            "storage_class": storage_class,
            "checksum": out.adler32,
            **self.ctx.common(),
            "store": store,
            "group": group,
        }

    def _hold(self, name: str, version: Version | None, delay: float, why: str) -> None:
        if name not in self.held:
            log.error("endit.flush_held", directory=self.directory, pnfsid=name, error=why)
        self.held[name] = (version, self.now() + delay)

    async def vanished(self, present: set[str]) -> None:
        """Full rescan: the plugin withdrew the files not in *present* (flush aborted)."""
        for name in [n for n in self.held if n not in present]:
            del self.held[name]
        gone = [f for n, f in self.tracked.items() if n not in present]
        ids = [f.request_id for f in gone if not f.foreign and f.request_id is not None]
        # An active migration is reading the file and will fail by itself.
        reason = "endit flush withdrawn"
        await self.ctx.store.withdraw(ids, reason)
        for flush in gone:
            self._forget(flush)

    async def finished(self, rows: list[Request]) -> list[str]:
        """Act on finished migrations; return the names to submit again."""
        again: list[str] = []
        for flush, row in self._closed(rows):
            if await self._outcome(flush, row):
                again.append(flush.name)
        return again

    async def _outcome(self, flush: Flush, row: Request) -> bool:
        fields = {"directory": self.directory, "pnfsid": flush.name, "request_id": row.id}
        if row.state == State.DONE:
            same = row.result_adler32 == flush.adler32 and row.size == flush.size
            if flush.foreign and not same:
                return True  # another file of that pnfsid went to tape: write this one
            await in_thread(self.ctx.paths.unlink, "out", flush.name)
            self.ctx.count("flushes_acknowledged")
            log.info("endit.flushed", bfid=row.bfid, volume=row.volume, **fields)
            return False
        code = row.error_code or 1
        permanent = row.state == State.CANCELLED or 30 <= code <= 39
        delay = math.inf if permanent else self.ctx.settings.flush_retry_s
        self.held[flush.name] = (flush.version, self.now() + delay)
        log.error("endit.flush_failed", error_code=code, error=row.error, **fields)
        return False

"""Removes: ``trash/<id>`` becomes a remove request per tape copy of that file.

The plugin names the trash file after the URI's ``bfid``, which is the pnfsid for files
it flushed (``osm://<name>?bfid=<pnfsid>``): every tape copy of that pnfsid is removed.
A name with no copy is taken as a tssd bfid (a file flushed through ``tss-hsm`` before
the pool moved to endit). The trash file is unlinked once the requests are recorded.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlsplit

import structlog

from tssd.backends.base import TapeBackend
from tssd.domain import Kind
from tssd.endit import protocol
from tssd.endit.context import DirContext, in_thread
from tssd.errors import InvalidRequest, TssdError
from tssd.retry import Retrier
from tssd.submit import MAX_PATH, SubmitSpec, parse_submit

log = structlog.get_logger()


class RemoveBook:
    def __init__(self, ctx: DirContext, backend: TapeBackend, retrier: Retrier) -> None:
        self.ctx = ctx
        self.backend = backend
        self.retrier = retrier

    @property
    def directory(self) -> str:
        return str(self.ctx.paths.base)

    async def take(self, names: set[str]) -> int:
        """Record removals for the trash files among *names*; return how many files."""
        if not names:
            return 0
        paths = self.ctx.paths
        read = await in_thread(lambda: [(n, protocol.read_trash(paths, n)) for n in sorted(names)])
        found = [(n, uri) for n, uri in read if uri is not None]
        if not found:
            return 0
        self._check_instances(found)
        pnfsids = sorted({n.upper() for n, _ in found})
        try:
            copies = await self.retrier.call("locate", lambda: self.backend.locate(pnfsids))
        except TssdError as exc:
            # The trash files stay: the next rescan tries again.
            log.warning("endit.remove_locate_failed", directory=self.directory, error=str(exc))
            return 0
        specs: list[SubmitSpec] = []
        for name, uri in found:
            bfids = [c.bfid for c in copies.get(name.upper(), [])] or [name]
            for bfid in bfids:
                spec = self._spec(name, bfid, uri)
                if spec is not None:
                    specs.append(spec)
        batch = max(1, self.ctx.settings.batch)
        for i in range(0, len(specs), batch):
            await self.ctx.store.submit(specs[i : i + batch])
        await in_thread(lambda: [paths.unlink("trash", n) for n, _ in found])
        self.ctx.count("requests_seen", len(found), action="remove")
        log.info(
            "endit.removes_recorded", directory=self.directory, files=len(found), copies=len(specs)
        )
        return len(found)

    def _check_instances(self, found: list[tuple[str, str]]) -> None:
        """dCache hands a remove (and a stage) only to the pool's HSM instance that the
        URI names (``HsmSet.getInstanceName``, ``getNearlineStorageByName``): a URI naming
        another instance means ``hsm_name`` here is not the pool's instance name."""
        want = self.ctx.directory.hsm_name
        others = sorted({urlsplit(uri).netloc for _, uri in found} - {want})
        if others:
            log.warning(
                "endit.instance_mismatch",
                directory=self.directory,
                hsm_name=want,
                uri_instances=others,
            )

    def _spec(self, name: str, bfid: str, uri: str) -> SubmitSpec | None:
        body = {
            "kind": Kind.REMOVE.value,
            "bfid": bfid,
            "pnfsid": name,
            "uris": [uri] if 0 < len(uri) <= MAX_PATH else None,
            **self.ctx.common(),
        }
        try:
            spec = parse_submit(body)
        except InvalidRequest as exc:
            log.warning(
                "endit.remove_invalid", directory=self.directory, pnfsid=name, error=str(exc)
            )
            return None
        return replace(spec, path=str(self.ctx.paths.trash / name))

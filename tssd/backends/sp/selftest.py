"""The self-test of an SP node: sign on, archive, query, retrieve in restore order,
verify and delete a few test objects through the backend's own code, reporting each step
(``tssctl backend selftest``).

Meant for commissioning: the options file, the node's password and policy, the
management class and the tape pool behind it are all exercised before tssd serves
dCache. The test objects live under the storage class ``tssd-selftest`` of the
configured filespace and are deleted at the end (also after a failed step).
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tssd.backends.base import ReadItem, TapeCopy, WriteItem
from tssd.backends.sp.library import SpLibrary
from tssd.config import SpSettings
from tssd.errors import TssdError
from tssd.files import adler32_hex

SELFTEST_CLASS = "tssd-selftest"
CHUNK = 1024 * 1024
#: Steps of a run that passes, in order.
STEPS = ("sign-on", "archive", "query", "retrieve", "delete")


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    ok: bool
    detail: str
    seconds: float


class _Bytes:
    """A test object's bytes as a Source: nothing on disk."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    async def chunks(self) -> AsyncIterator[bytes]:
        for start in range(0, self.size, CHUNK):
            yield self.data[start : start + CHUNK]


class _Check:
    """A Sink that only counts and checksums what is read back."""

    def __init__(self) -> None:
        self.nbytes, self._adler = 0, 1

    async def write(self, data: bytes) -> None:
        self.nbytes += len(data)
        self._adler = zlib.adler32(data, self._adler)

    async def commit(self) -> tuple[int, str]:
        return self.nbytes, adler32_hex(self._adler)

    async def abort(self) -> None:
        self.nbytes, self._adler = 0, 1

    async def retract(self) -> None:
        await self.abort()


@dataclass
class _Run:
    library: SpLibrary
    objects: int
    size: int
    sources: dict[str, str] = field(default_factory=dict)
    copies: list[TapeCopy] = field(default_factory=list)


def _pnfsid(i: int) -> str:
    # Recognisable and never a real ChimeraID: dCache's start with 0000.
    return f"5E1F7E57{os.getpid():08X}{i:020X}"


async def selftest(
    settings: SpSettings, *, objects: int = 3, size: int = 1024 * 1024
) -> AsyncIterator[Step]:
    """Run the steps in order, stopping at the first failure; always delete at the end."""
    library = SpLibrary(settings)
    run = _Run(library, objects, size)
    opened = await _timed("sign-on", _sign_on, run)
    yield opened
    try:
        if not opened.ok:
            return
        for name, fn in (("archive", _archive), ("query", _query), ("retrieve", _retrieve)):
            step = await _timed(name, fn, run)
            yield step
            if not step.ok:
                return
    finally:
        if run.copies:
            yield await _timed("delete", _delete, run)
        await library.close()


async def _timed(name: str, fn: Callable[[_Run], Awaitable[str]], run: _Run) -> Step:
    started = time.monotonic()
    try:
        detail, ok = await fn(run), True
    except (TssdError, OSError) as exc:
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return Step(name, ok, detail, round(time.monotonic() - started, 3))


async def _sign_on(run: _Run) -> str:
    await run.library.open()
    return f"session signed on, filespace {run.library.describe()['filespace']} registered"


async def _archive(run: _Run) -> str:
    items = []
    for i in range(run.objects):
        data = os.urandom(run.size + i)
        pnfsid = _pnfsid(i)
        run.sources[pnfsid] = adler32_hex(zlib.adler32(data))
        items.append(WriteItem(pnfsid, SELFTEST_CLASS, _Bytes(data), run.sources[pnfsid]))
    drive = (await run.library.drives())[0].name
    await run.library.mount(drive, await run.library.writable_volume(SELFTEST_CLASS, 1))
    try:
        results = [r async for r in run.library.write(drive, items)]
    finally:
        await run.library.dismount(drive)
    run.copies = [r.copy for r in results if r.copy is not None]
    failed = [r.error for r in results if r.error is not None]
    if failed:
        raise failed[0]
    return f"{len(run.copies)} objects of {run.size} bytes archived"


async def _query(run: _Run) -> str:
    found = await run.library.locate(list(run.sources))
    missing = sorted(set(run.sources) - set(found))
    if missing:
        raise TssdError(f"the query finds no archive object of {', '.join(missing)}")
    run.copies = sorted((c for cs in found.values() for c in cs), key=lambda c: c.restore_order)
    volumes = sorted({c.volume for c in run.copies})
    return f"{len(run.copies)} objects on {', '.join(volumes)} ({run.copies[0].media})"


async def _retrieve(run: _Run) -> str:
    drive = (await run.library.drives())[0].name
    verified = 0
    for volume in dict.fromkeys(c.volume for c in run.copies):
        on_volume = [c for c in run.copies if c.volume == volume]
        await run.library.mount(drive, volume)
        try:
            items = [ReadItem(c, _Check()) for c in on_volume]
            async for result in run.library.read(drive, items):
                if result.error is not None:
                    raise result.error
                adler = run.sources[result.item.copy.pnfsid]
                if result.adler32 != adler:
                    raise TssdError(
                        f"{result.item.copy.bfid}: adler32 {result.adler32}, not {adler}"
                    )
                verified += 1
        finally:
            await run.library.dismount(drive)
    return f"{verified} objects read back in restore order, adler32 verified"


async def _delete(run: _Run) -> str:
    for copy in run.copies:
        await run.library.remove(copy.bfid)
    left = await run.library.locate(list(run.sources))
    if left:
        raise TssdError(f"objects left after delete: {', '.join(sorted(left))}")
    return f"{len(run.copies)} test objects deleted"


def as_dict(step: Step) -> dict[str, Any]:
    return {"step": step.name, "ok": step.ok, "detail": step.detail, "seconds": step.seconds}

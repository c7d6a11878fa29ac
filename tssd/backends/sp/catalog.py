"""The SP server as tssd's catalog: archive queries turned into :class:`TapeCopy`.

The server is the truth; tssd keeps no table of its own. What it remembers in memory is
the volumes it has seen (restore-order key and name), so that a mount can tell a volume
that exists from one that does not without a query each time.
"""

from __future__ import annotations

from collections.abc import Sequence

from tssd.backends.base import CopyPlacement, TapeCopy
from tssd.backends.records import normalize_adler32
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.client import ArchivedObject, Session
from tssd.backends.sp.naming import (
    ObjectName,
    bfid_of,
    decode_objinfo,
    pnfsid_of,
    position_of,
    storage_class_of,
    volume_key,
)
from tssd.backends.sp.sessions import SpSession
from tssd.backends.sp.volumes import VolumeNames

#: Up to this many pnfsids are looked up one query each; more, with one query of the
#: whole filespace. The storage class (the high level) is not known at locate time, so a
#: per-file query has a wildcard high level, which the server answers by going through
#: the filespace's names: thousands of those cost far more than one listing.
PER_FILE_QUERIES = 32


class SpCatalog:
    def __init__(self, session: SpSession, filespace: str, names: VolumeNames) -> None:
        self._session = session
        self._filespace = filespace
        self.names = names

    def to_copy(self, obj: ArchivedObject) -> TapeCopy:
        top, hi_hi, hi_lo, lo_hi, lo_lo = obj.restore_order
        size, adler32 = decode_objinfo(obj.objinfo)
        return TapeCopy(
            pnfsid=pnfsid_of(obj.low),
            bfid=bfid_of(obj.object_id),
            volume=self.names.name(volume_key(top, hi_hi), obj),
            position=position_of(hi_lo, lo_hi, lo_lo),
            size=obj.size_estimate if size is None else size,
            adler32=normalize_adler32(adler32),
            storage_class=storage_class_of(obj.high),
            written_at=obj.inserted,
            media="disk" if obj.media_class == c.MEDIA_FIXED else "tape",
        )

    async def query(self, high: str, low: str) -> list[ArchivedObject]:
        name = ObjectName(self._filespace, high, low)

        def run(session: Session) -> list[ArchivedObject]:
            return session.query(name)

        found = await self._session.run(f"query of {high}{low}", run)
        await self.names.learn(found)
        return found

    async def copies_of(self, pnfsid: str, storage_class: str | None = None) -> list[TapeCopy]:
        high = f"/{storage_class}" if storage_class else "/*"
        return [self.to_copy(o) for o in await self.query(high, f"/{pnfsid}")]

    async def everything(self) -> list[TapeCopy]:
        return [self.to_copy(o) for o in await self.query("/*", "/*")]

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        wanted = list(dict.fromkeys(pnfsids))
        found: dict[str, list[TapeCopy]] = {}
        if len(wanted) > PER_FILE_QUERIES:
            chosen = set(wanted)
            for copy in await self.everything():
                if copy.pnfsid in chosen:
                    found.setdefault(copy.pnfsid, []).append(copy)
        else:
            for pnfsid in wanted:
                copies = await self.copies_of(pnfsid)
                if copies:
                    found[pnfsid] = copies
        for copies in found.values():
            copies.sort(key=lambda cp: (cp.written_at, cp.restore_order))
        return found

    async def find_copy(self, pnfsid: str, size: int, adler32: str) -> TapeCopy | None:
        """An archived copy with these bytes: what makes migration idempotent."""
        for copy in await self.copies_of(pnfsid):
            if copy.size == size and copy.adler32 == adler32:
                return copy
        return None

    async def placements(self) -> list[CopyPlacement]:
        return [
            CopyPlacement(c.pnfsid, c.volume, c.position, c.size, c.written_at)
            for c in await self.everything()
        ]

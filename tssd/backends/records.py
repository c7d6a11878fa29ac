"""Catalog helpers shared by the backends that keep their catalog in tssd's database."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

from tssd.backends.base import TapeCopy
from tssd.backends.catalog import CatalogUnavailable, ObjectTables, StoredObject
from tssd.errors import TransientBackendError

__all__ = ["MEDIA_TAPE", "ObjectCatalog", "normalize_adler32", "to_copy"]

MEDIA_TAPE = "tape"


def normalize_adler32(value: str | None) -> str | None:
    """dCache may drop leading zeros or use upper case; compare canonical forms."""
    if not value:
        return None
    try:
        return f"{int(value, 16):08x}"
    except ValueError:
        return value.strip().lower()


def to_copy(obj: StoredObject) -> TapeCopy:
    return TapeCopy(
        pnfsid=obj.pnfsid,
        bfid=obj.bfid,
        volume=obj.volume,
        position=obj.seq,
        size=obj.size,
        adler32=obj.adler32,
        storage_class=obj.storage_class,
        written_at=obj.written_at,
        offset=obj.offset,
        media=MEDIA_TAPE,
    )


class ObjectCatalog:
    """Object queries common to the catalogs kept in tssd's database.

    A catalog that cannot be reached becomes a transient backend error.
    """

    unavailable: ClassVar[str] = "tape catalog unavailable"
    error_code: ClassVar[int | None] = None

    def __init__(self, objects: ObjectTables) -> None:
        self._objects = objects

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """An unreachable catalog in the block becomes a transient backend error."""
        try:
            yield
        except CatalogUnavailable as exc:
            raise TransientBackendError(f"{self.unavailable}: {exc}", code=self.error_code) from exc

    async def object(self, bfid: str) -> StoredObject | None:
        with self._guard():
            return await self._objects.get(bfid)

    async def objects(self, bfids: Sequence[str]) -> dict[str, StoredObject]:
        """The objects among *bfids* that exist, by bfid (one query per chunk)."""
        with self._guard():
            rows = await self._objects.with_bfids(list(dict.fromkeys(bfids)))
        return {obj.bfid: obj for obj in rows}

    async def copies(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        found: dict[str, list[TapeCopy]] = {}
        with self._guard():
            rows = await self._objects.of_pnfsids(list(dict.fromkeys(pnfsids)))
        for obj in rows:
            found.setdefault(obj.pnfsid, []).append(to_copy(obj))
        return found

    async def find_copy(self, pnfsid: str, size: int, adler32: str) -> TapeCopy | None:
        """An existing copy with these bytes: what makes migration idempotent."""
        with self._guard():
            rows = await self._objects.of_pnfsid_sized(pnfsid, size)
        for obj in rows:
            if normalize_adler32(obj.adler32) == adler32:
                return to_copy(obj)
        return None

    async def delete(self, bfid: str) -> bool:
        with self._guard():
            return await self._objects.delete(bfid)

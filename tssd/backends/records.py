"""Catalog helpers shared by the backends that keep their catalog in tssd's database."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar, Protocol

from tssd.backends.base import TapeCopy
from tssd.db.engine import DatabaseError, Sessions
from tssd.db.tape_catalog import IN_CHUNK, ObjectTable, chunks
from tssd.errors import TransientBackendError

__all__ = [
    "IN_CHUNK", "MEDIA_TAPE", "CatalogObject", "ObjectCatalog",
    "chunks", "normalize_adler32", "to_copy",
]  # fmt: skip

MEDIA_TAPE = "tape"


class CatalogObject(Protocol):
    """The columns every backend catalog row has (SimObject, ScsiObject)."""

    @property
    def pnfsid(self) -> str: ...

    @property
    def bfid(self) -> str: ...

    @property
    def volume(self) -> str: ...

    @property
    def seq(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def adler32(self) -> str | None: ...

    @property
    def storage_class(self) -> str | None: ...

    @property
    def written_at(self) -> datetime: ...


def normalize_adler32(value: str | None) -> str | None:
    """dCache may drop leading zeros or use upper case; compare canonical forms."""
    if not value:
        return None
    try:
        return f"{int(value, 16):08x}"
    except ValueError:
        return value.strip().lower()


def to_copy(obj: CatalogObject) -> TapeCopy:
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

    Subclasses name their ORM model; database errors become transient backend errors.
    """

    model: ClassVar[Any]
    unavailable: ClassVar[str] = "tape catalog unavailable"
    error_code: ClassVar[int | None] = None

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions
        self._objects = ObjectTable(sessions, self.model)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Database errors in the block become transient backend errors."""
        try:
            yield
        except DatabaseError as exc:
            raise TransientBackendError(f"{self.unavailable}: {exc}", code=self.error_code) from exc

    async def object(self, bfid: str) -> Any:
        with self._guard():
            return await self._objects.get(bfid)

    async def objects(self, bfids: Sequence[str]) -> dict[str, Any]:
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

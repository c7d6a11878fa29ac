"""Catalog helpers shared by the backends that keep their catalog in tssd's database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tssd.backends.base import TapeCopy
from tssd.errors import TransientBackendError

MEDIA_TAPE = "tape"
#: Bound parameters per IN list.
IN_CHUNK = 500


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


def as_utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone-aware columns; they are UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def to_copy(obj: CatalogObject) -> TapeCopy:
    return TapeCopy(
        pnfsid=obj.pnfsid,
        bfid=obj.bfid,
        volume=obj.volume,
        position=obj.seq,
        size=obj.size,
        adler32=obj.adler32,
        storage_class=obj.storage_class,
        written_at=as_utc(obj.written_at),
        offset=obj.offset,
        media=MEDIA_TAPE,
    )


def chunks(items: Sequence[str], size: int = IN_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ObjectCatalog:
    """Object queries common to the catalogs kept in tssd's database.

    Subclasses name their ORM model; database errors become transient backend errors.
    """

    model: ClassVar[Any]
    unavailable: ClassVar[str] = "tape catalog unavailable"
    error_code: ClassVar[int | None] = None

    def __init__(self, sessions: async_sessionmaker[Any]) -> None:
        self._sessions = sessions

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[AsyncSession]:
        try:
            async with self._sessions() as session:
                yield session
        except SQLAlchemyError as exc:
            raise TransientBackendError(f"{self.unavailable}: {exc}", code=self.error_code) from exc

    async def object(self, bfid: str) -> Any:
        async with self._session() as session:
            return await session.get(self.model, bfid)

    async def objects(self, bfids: Sequence[str]) -> dict[str, Any]:
        """The objects among *bfids* that exist, by bfid (one query per chunk)."""
        found: dict[str, Any] = {}
        async with self._session() as session:
            for chunk in chunks(list(dict.fromkeys(bfids))):
                rows = await session.scalars(select(self.model).where(self.model.bfid.in_(chunk)))
                found.update((obj.bfid, obj) for obj in rows)
        return found

    async def copies(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        found: dict[str, list[TapeCopy]] = {}
        async with self._session() as session:
            for chunk in chunks(list(dict.fromkeys(pnfsids))):
                rows = await session.scalars(
                    select(self.model)
                    .where(self.model.pnfsid.in_(chunk))
                    .order_by(self.model.written_at, self.model.bfid)
                )
                for obj in rows:
                    found.setdefault(obj.pnfsid, []).append(to_copy(obj))
        return found

    async def find_copy(self, pnfsid: str, size: int, adler32: str) -> TapeCopy | None:
        """An existing copy with these bytes: what makes migration idempotent."""
        async with self._session() as session:
            rows = await session.scalars(
                select(self.model).where(self.model.pnfsid == pnfsid, self.model.size == size)
            )
            for obj in rows:
                if normalize_adler32(obj.adler32) == adler32:
                    return to_copy(obj)
        return None

    async def delete(self, bfid: str) -> bool:
        async with self._session() as session, session.begin():
            result = await session.execute(delete(self.model).where(self.model.bfid == bfid))
            return bool(getattr(result, "rowcount", 0))

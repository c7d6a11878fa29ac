"""Catalog helpers shared by the backends that keep their catalog in tssd's database."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from tssd.backends.base import TapeCopy

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

"""The catalog a backend keeps in tssd's database, as the backends see it: records and
narrow interfaces.

The simulated and the SCSI library keep their catalogs (cartridges and the objects on
them) in tables of tssd's database. :mod:`tssd.db` implements the interfaces below in SQL
and returns only these records; a backend is given a :class:`CatalogGateway` and never
sees a session, an engine or an ORM row. This module sits in the base layer so that both
``tssd.db`` (below the backends) and the backends can import it.

A database failure of a query a backend serves its callers with reaches it as
:class:`CatalogUnavailable`, which it reports in its own terms (a transient backend error,
as a real library reports a server it cannot reach). The catalog CSV's import and export
let the database's error through, so that the API answers it as for any request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tssd.errors import TssdError


class CatalogUnavailable(TssdError):
    """The catalog's database did not answer; the message is the database's."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One copy of an object on a cartridge, as the catalog records it."""

    bfid: str
    pnfsid: str
    volume: str
    seq: int
    #: Bytes written on the volume before this object.
    offset: int
    size: int
    adler32: str | None
    storage_class: str | None
    written_at: datetime
    #: False for a simulated catalog import: the library holds no bytes, recalls read filler.
    has_data: bool = True
    #: The block id of the object's header block (SCSI library).
    block: int = 0


@dataclass(frozen=True, slots=True)
class SimCartridge:
    """A simulated cartridge, its fill state and the storage class it serves."""

    volume: str
    storage_class: str | None
    capacity: int
    used: int
    next_seq: int
    full: bool


@dataclass(frozen=True, slots=True)
class ScsiCartridge:
    """A cartridge of the SCSI library's changer inventory, and its fill state."""

    volume: str
    storage_class: str | None
    #: Nominal capacity, used to choose a tape; the drive's end of medium closes it.
    capacity: int
    used: int
    block_size: int
    #: Logical block id where the next object's header block goes (after the label).
    next_block: int
    next_seq: int
    labelled: bool
    full: bool
    #: ``ok`` or ``disabled``.
    state: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class TapeFill:
    """A cartridge's fill state after a catalog import."""

    capacity: int
    used: int
    next_seq: int
    storage_class: str | None


#: Objects of the catalog by volume and sequence number, as plain column dicts.
ByVolume = dict[str, dict[int, dict[str, Any]]]

#: Given the cartridges by volume and the objects already on the imported volumes, the
#: objects to write and each volume's fill; raises to write nothing.
ImportPlan = Callable[
    [dict[str, SimCartridge], ByVolume],
    Awaitable[tuple[list[dict[str, Any]], dict[str, TapeFill]]],
]

#: Given the tapes each storage class holds (None: scratch), raises to refuse a claim.
ClaimGuard = Callable[[dict[str | None, int]], None]


class ObjectTables(Protocol):
    """The object queries every database-kept catalog answers."""

    async def get(self, bfid: str) -> StoredObject | None: ...

    async def with_bfids(self, bfids: Sequence[str]) -> list[StoredObject]: ...

    async def of_pnfsids(self, pnfsids: Sequence[str]) -> list[StoredObject]: ...

    async def of_pnfsid_sized(self, pnfsid: str, size: int) -> list[StoredObject]: ...

    async def delete(self, bfid: str) -> bool: ...


class SimTables(ObjectTables, Protocol):
    """The simulated library's catalog (``sim_tapes``, ``sim_objects``)."""

    async def ensure_tapes(self, volumes: Sequence[str], capacity: int) -> int: ...

    async def tape(self, volume: str) -> SimCartridge | None: ...

    async def layout(self, volume: str) -> list[tuple[int, int, int]]: ...

    async def placements(self) -> list[tuple[str, str, int, int, datetime]]: ...

    async def known_bfids(self, bfids: list[str]) -> set[str]: ...

    async def max_capacity(self) -> int: ...

    async def assign_tape(
        self, storage_class: str, size: int, may_claim: ClaimGuard | None = None
    ) -> str | None: ...

    async def append(
        self, volume: str, check: Callable[[SimCartridge], None], **values: Any
    ) -> StoredObject | None: ...

    async def import_objects(
        self, volumes: list[str], *, replace: bool, plan: ImportPlan, chunk: int = 500
    ) -> None: ...

    async def export_rows(self) -> list[tuple[str, str, int, int, str | None, datetime]]: ...

    async def count_objects(self) -> int: ...


class ScsiTables(ObjectTables, Protocol):
    """The SCSI library's catalog (``scsi_tapes``, ``scsi_objects``)."""

    async def add_tapes(self, volumes: Iterable[str], capacity: int, block_size: int) -> int: ...

    async def tape(self, volume: str) -> ScsiCartridge | None: ...

    async def max_capacity(self) -> int: ...

    async def assign_tape(
        self, storage_class: str, pick: Callable[[Sequence[ScsiCartridge]], ScsiCartridge | None]
    ) -> str | None: ...

    async def mark_labelled(self, volume: str, next_block: int, block_size: int) -> bool: ...

    async def append(
        self, volume: str, *, block: int, blocks: int, **values: Any
    ) -> StoredObject | None: ...

    async def close_tape(self, volume: str, reason: str, *, disable: bool = False) -> None: ...


class CatalogGateway(Protocol):
    """What the factory gives a backend for its catalog: the tables of each backend that
    keeps one in tssd's database (a backend with its own server, SP, uses none)."""

    def sim(self) -> SimTables: ...

    def scsi(self) -> ScsiTables: ...

"""The tape backend interface.

A backend is the only part of tssd that talks to tape hardware or to a tape manager
(IBM Spectrum Protect, a SCSI library). The scheduler decides *what* to do and in which
order; the backend does it and reports what happened.

Contract for every implementation:

* Methods are coroutines and may be called concurrently for *different* drives; calls
  for one drive are never concurrent (the scheduler serialises them).
* A volume is mounted in at most one drive: :meth:`mount` of a volume that is in another
  drive raises :class:`~tssd.errors.TransientBackendError`.
* Errors are :class:`~tssd.errors.TransientBackendError` (retrying later may succeed) or
  :class:`~tssd.errors.PermanentBackendError` (it will not); drivers' own exceptions are
  translated at this boundary with ``raise ... from exc``. Local disk errors while writing
  a recalled file or reading a file to migrate are :class:`~tssd.errors.DataError`
  subclasses, raised by the :class:`Sink` / :class:`Source` and passed through.
* Retrying is the caller's job (:mod:`tssd.retry`), never the backend's.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, Self, TextIO

from tssd.errors import NotSupported
from tssd.tape.geometry import Profile


@dataclass(frozen=True, slots=True)
class TapeCopy:
    """One copy of an object on tape, as the backend's catalog knows it."""

    pnfsid: str
    bfid: str
    volume: str
    #: Restore order on the volume (file sequence number): sort ascending to read.
    position: int
    size: int
    adler32: str | None
    storage_class: str | None
    written_at: datetime
    #: Bytes written on the volume before this copy (drives the locate model).
    offset: int = 0
    #: IBM SP mediaClass: "tape" (0x20, library) or "disk" (0x10, disk storage pool).
    media: str = "tape"

    @property
    def restore_order(self) -> tuple[str, int]:
        """IBM SP restoreOrderExt in short: sort ascending; the volume comes first."""
        return (self.volume, self.position)


class CopyPlacement(NamedTuple):
    """Where one copy sits, without the rest of :class:`TapeCopy`: catalog-wide scans."""

    pnfsid: str
    volume: str
    position: int
    size: int
    written_at: datetime


@dataclass(frozen=True, slots=True)
class DriveInfo:
    name: str
    #: Volume currently loaded, or None.
    volume: str | None
    online: bool = True


class Sink(Protocol):
    """Where recalled bytes go: a file on pool disk, or a byte counter in simulation."""

    async def write(self, data: bytes) -> None:
        """Append *data*. Raises :class:`~tssd.errors.DataError` on local disk errors."""

    async def commit(self) -> tuple[int, str]:
        """Make the data visible at its final place; return (bytes, adler32 hex)."""

    async def abort(self) -> None:
        """Discard what was written; leaves nothing half-written behind."""

    async def retract(self) -> None:
        """Remove what :meth:`commit` made visible: its request was cancelled meanwhile.

        Called by tssd, never by a backend. Never raises.
        """


class Source(Protocol):
    """Where bytes to migrate come from."""

    size: int

    def chunks(self) -> AsyncIterator[bytes]:
        """The object's bytes. Raises :class:`~tssd.errors.SourceUnreadable`."""
        ...


@dataclass(frozen=True, slots=True)
class ReadItem:
    copy: TapeCopy
    sink: Sink


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What happened to one :class:`ReadItem`: ``error`` is None on success."""

    item: ReadItem
    nbytes: int = 0
    adler32: str | None = None
    locate_s: float = 0.0
    transfer_s: float = 0.0
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class WriteItem:
    pnfsid: str
    storage_class: str
    source: Source
    #: adler32 expected by the client (flag-c), verified against the bytes read.
    adler32: str | None = None


@dataclass(frozen=True, slots=True)
class WriteResult:
    item: WriteItem
    copy: TapeCopy | None = None
    transfer_s: float = 0.0
    error: Exception | None = None


class TapeBackend(abc.ABC):
    """A tape library and its catalog. Use as ``async with backend:``."""

    name: str = "abstract"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect to the library. Raises TransientBackendError if it is unreachable."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Never raises."""

    @abc.abstractmethod
    async def drives(self) -> list[DriveInfo]:
        """Every drive this backend may use, with the volume it holds."""

    @abc.abstractmethod
    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        """Every tape copy of each pnfsid; pnfsids without copies are absent from the map."""

    @abc.abstractmethod
    async def mount(self, drive: str, volume: str) -> None:
        """Bring *volume* into *drive* (dismounting what is there). Returns when ready.

        Raises TransientBackendError if the volume is busy in another drive or the robot
        fails, PermanentBackendError if the volume does not exist.
        """

    @abc.abstractmethod
    async def dismount(self, drive: str) -> None:
        """Rewind, unload and put away the volume in *drive*; no-op when empty."""

    @abc.abstractmethod
    def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        """Read *items* from the volume mounted in *drive*, in the order given.

        Yields one result per item as it completes. A failure of one item (checksum
        mismatch, object missing, sink error) is reported in its result and the next item
        is read; an error that breaks the session (drive failure) is raised.
        """

    @abc.abstractmethod
    async def writable_volume(self, storage_class: str, size: int) -> str:
        """The volume that the next *size* bytes of *storage_class* should go to.

        Opens a scratch volume when no filling one has room. Raises
        PermanentBackendError when the library has no room left or *storage_class* may
        claim no scratch volume (``[[storage_classes]]``, given to the backend by the
        factory: none admits it, or its table's ``max_tapes`` are held), and its subclass
        TooLargeForTape when *size* is more than the backend can ever put in one place
        (more than any cartridge holds, for a backend that cannot spread a batch).
        """

    async def max_object_size(self) -> int | None:
        """The most bytes one object may have: what the largest cartridge holds.

        None when unknown. A migration larger than this fails at once (exit 31) instead
        of being retried for ever.
        """
        return None

    @abc.abstractmethod
    def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        """Append *items* to the volume mounted in *drive*, yielding one result each.

        An item already on tape with the same size and checksum is not written again:
        its existing copy is returned (migration is idempotent).
        """

    @abc.abstractmethod
    async def remove(self, bfid: str) -> None:
        """Delete one copy from the catalog. Raises ObjectNotFound if there is none."""

    # -- what the scheduler may know of the media (optional) -------------------------

    def timing(self) -> Profile | None:
        """The library's nominal drive and media model, for the cost of a mount.

        None when unknown: the scheduler then estimates with LTO-9 figures. Never raises.
        """
        return None

    async def geometry(self, volume: str) -> Profile | None:
        """The layout model the scheduler orders *volume*'s reads on (software RAO).

        A media model (:class:`~tssd.tape.geometry.Profile`) whose ``capacity_bytes`` is
        this volume's; the ``offset`` of each :class:`TapeCopy` on the volume is the copy's
        position in it. Only what the backend can know, best first: once the volume is
        mounted, the drive's own report (READ END OF WRAP POSITION, IBM LTO-7 and later):
        the profile's ``wrap_ends`` (:func:`~tssd.tape.geometry.reported`, in the offsets'
        space) with ``position_spread`` 0; else the nominal geometry of the volume's media
        type, offsets estimated from the sizes of the objects before the copy (the true
        layout differs by compression and rewritten blocks) and ``position_spread`` how far
        they may be off. The scheduler asks after each mount, before the first read. None
        when the media is unknown: the scheduler then reads in position order. Raises
        nothing but
        :class:`~tssd.errors.TransientBackendError` (the scheduler then reads in position
        order too).
        """
        return None

    # -- optional catalog tools (operators, tssd simulate); absent on most backends ----

    async def placements(self) -> list[CopyPlacement]:
        """Every copy in the catalog, for analyses such as ``tssctl duplicates``."""
        raise NotSupported(f"the {self.name} backend cannot list its whole catalog")

    async def import_catalog(self, source: TextIO, *, replace: bool) -> dict[str, Any]:
        """Load copies from a catalog CSV (docs/api.md, "catalog CSV"); return counts."""
        raise NotSupported(f"the {self.name} backend cannot import a catalog")

    async def export_catalog(self, target: TextIO) -> int:
        """Write the catalog as CSV (docs/api.md, "catalog CSV"); return the rows written."""
        raise NotSupported(f"the {self.name} backend cannot export its catalog")

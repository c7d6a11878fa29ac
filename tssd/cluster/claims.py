"""Which cartridges this instance may mount: the drive row is the claim.

Writing a volume into one's own drive row before the mount fails on the unique
``drives.volume`` while any other drive, of any instance, holds or is loading it, so no
two instances can mount one cartridge. Volumes in other instances' drives are remembered
so the scheduler does not pick them (one query per heartbeat, not per pass).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import structlog

from tssd.errors import Conflict
from tssd.ports.cluster import ClusterBook

log = structlog.get_logger()


class VolumeTaken(Conflict):
    """The cartridge is in, or on its way into, a drive of another instance."""


class VolumeClaims(Protocol):
    """What the drive manager and the scheduler ask before using a cartridge."""

    def mountable(self, volume: str) -> bool:
        """False while *volume* is known to be in another instance's drive."""
        ...

    async def claim(self, drive: str, volume: str) -> None:
        """Reserve *volume* for *drive* before mounting it; raise :class:`VolumeTaken`."""
        ...

    @property
    def scope(self) -> frozenset[str] | None:
        """The drives whose rows and mounts are this instance's to reset at its start;
        None (every drive) when it is alone."""
        ...


class LocalClaims:
    """A single instance: its in-memory view and the unique drive volume suffice."""

    def mountable(self, volume: str) -> bool:
        return True

    async def claim(self, drive: str, volume: str) -> None:
        return None

    @property
    def scope(self) -> frozenset[str] | None:
        return None


class SharedClaims:
    """Claims of one instance among several sharing the database."""

    def __init__(self, book: ClusterBook, instance: str) -> None:
        self.book = book
        self.instance = instance
        self.drives: frozenset[str] = frozenset()
        self.foreign: set[str] = set()

    def own(self, names: Iterable[str]) -> None:
        self.drives = frozenset(names)

    def mountable(self, volume: str) -> bool:
        return volume not in self.foreign

    @property
    def scope(self) -> frozenset[str] | None:
        return self.drives

    async def claim(self, drive: str, volume: str) -> None:
        if not await self.book.take_volume(drive, volume, self.instance):
            self.foreign.add(volume)
            log.info("cluster.volume_taken", drive=drive, volume=volume)
            raise VolumeTaken(f"volume {volume} is in a drive of another instance")

    async def refresh(self) -> None:
        """Reload the volumes held by drives that are not this instance's."""
        self.foreign = await self.book.foreign_volumes(self.drives, self.instance)

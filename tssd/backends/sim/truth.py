"""What the simulated library knows of each volume, and what it tells the scheduler.

The library keeps the true layout of its cartridges (``layout.physical_offsets``) to
time its own locates; the scheduler is told only what a real site's backend could tell:
the media type's nominal geometry at the volume's capacity, positions estimated from
the objects' sizes, or, with ``sim.drive_geometry`` and the volume in a drive, the wrap
ends that drive reports. The caches here are per volume and forgotten when the volume
is written to or the catalog is replaced.
"""

from __future__ import annotations

import dataclasses

from tssd.backends.sim.catalog import Catalog
from tssd.backends.sim.layout import drive_geometry, physical_offsets
from tssd.config import SimSettings
from tssd.tape.geometry import ESTIMATE_SPREAD, Profile


class VolumeKnowledge:
    """Per volume: the true places of its objects and the geometry the scheduler gets."""

    def __init__(self, catalog: Catalog, profile: Profile, settings: SimSettings) -> None:
        self._catalog = catalog
        self._profile = profile
        self._settings = settings
        # Catalog offset -> true (start, end) of each object, and the true end of data:
        # the library's secret.
        self._truth: dict[str, tuple[dict[int, tuple[int, int]], int]] = {}
        self._nominal: dict[str, Profile] = {}
        # The wrap ends a drive reports (sim.drive_geometry), None where it tells nothing.
        self._reports: dict[str, Profile | None] = {}

    async def told(self, volume: str, *, in_drive: bool) -> Profile | None:
        """The geometry the scheduler gets for *volume* (``TapeBackend.geometry``): the
        drive's report when ``sim.drive_geometry`` is set and *in_drive*, else the media
        type's nominal geometry at the volume's own capacity, its offsets estimates off
        by as much as a real site would assume (``ESTIMATE_SPREAD``, not the simulated
        ``layout_spread``); None for an unknown volume."""
        if self._settings.drive_geometry and in_drive:
            if volume not in self._reports and (tape := await self._catalog.tape(volume)):
                objects = await self._catalog.layout(volume)
                self._reports[volume] = drive_geometry(
                    self._profile, tape.capacity, volume, objects, self._settings
                )
            if (report := self._reports.get(volume)) is not None:
                return report
        known = self._nominal.get(volume)
        if known is None:
            tape = await self._catalog.tape(volume)
            if tape is None:
                return None
            known = dataclasses.replace(
                self._profile, capacity_bytes=tape.capacity, position_spread=ESTIMATE_SPREAD
            )
            self._nominal[volume] = known
        return known

    async def layout(self, volume: str) -> tuple[dict[int, tuple[int, int]], int]:
        """Catalog offset -> true (start, end) of each object on *volume*; its true end
        of data."""
        known = self._truth.get(volume)
        if known is None:
            objects = await self._catalog.layout(volume)
            s = self._settings
            places = physical_offsets(volume, objects, s.layout_spread, s.file_spread, s.seed)
            end = places[-1][1] if places else 0
            known = ({o[1]: p for o, p in zip(objects, places, strict=True)}, end)
            self._truth[volume] = known
        return known

    async def span(self, volume: str, offset: int, size: int) -> tuple[int, int]:
        """The true (start, end) of the object at catalog *offset* on *volume*."""
        places, _ = await self.layout(volume)
        if offset not in places:  # written since: learn the tape again
            self.written(volume)
            places, _ = await self.layout(volume)
        return places.get(offset, (offset, offset + size))

    def written(self, volume: str) -> None:
        """*volume* got a new object: its layout and its drive's report change."""
        self._truth.pop(volume, None)
        self._reports.pop(volume, None)

    def clear(self) -> None:
        """The catalog was replaced: forget every volume."""
        self._truth.clear()
        self._nominal.clear()
        self._reports.clear()

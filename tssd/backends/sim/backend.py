"""The simulated library's entry point for :mod:`tssd.backends.factory`."""

from __future__ import annotations

from tssd.backends.base import TapeBackend
from tssd.backends.catalog import CatalogGateway
from tssd.clock import Clock
from tssd.config import Settings


def create(settings: Settings, catalogs: CatalogGateway, clock: Clock) -> TapeBackend:
    """The simulated library of ``[sim]``, its catalog in the ``sim_*`` tables."""
    from tssd.backends.sim.library import SimLibrary

    # SimLibrary applies sim.tape_capacity (> 0 overrides the profile's capacity).
    return SimLibrary(
        settings.sim,
        catalogs.sim(),
        clock,
        settings.path(settings.sim.data_dir),
        time_scale=settings.sim.time_scale,
        storage_classes=settings.storage_classes,
    )

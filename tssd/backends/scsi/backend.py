"""The SCSI library's entry point for :mod:`tssd.backends.factory`."""

from __future__ import annotations

from tssd.backends.base import TapeBackend
from tssd.backends.catalog import CatalogGateway
from tssd.clock import Clock
from tssd.config import Settings


def create(settings: Settings, catalogs: CatalogGateway, clock: Clock) -> TapeBackend:
    """The SCSI library of ``[scsi]`` (on emulated devices when ``emulation_dir`` is
    set), its catalog in the ``scsi_*`` tables."""
    # Imported here: the package itself stays light for the changer emulator.
    from tssd.backends.scsi.library import ScsiLibrary, emulated_settings

    scsi = settings.scsi
    if scsi.emulation_dir:
        scsi = emulated_settings(scsi, settings.path(scsi.emulation_dir))
    return ScsiLibrary(scsi, catalogs.scsi(), clock, settings.storage_classes)

"""Build the configured tape backend: the one place that knows every backend type."""

from __future__ import annotations

from tssd.backends.base import TapeBackend
from tssd.clock import Clock
from tssd.config import Settings
from tssd.db.engine import Sessions
from tssd.errors import ConfigError

BACKEND_TYPES = ("sim", "scsi")


def create_backend(settings: Settings, sessions: Sessions, clock: Clock) -> TapeBackend:
    """The backend named by ``backend.type``; raises ConfigError for an unknown type."""
    kind = settings.backend.type
    if kind == "sim":
        # Imported here so that a deployment with another backend never loads the simulator.
        from tssd.backends.sim import SimLibrary

        # SimLibrary applies sim.tape_capacity (> 0 overrides the profile's capacity).
        return SimLibrary(
            settings.sim,
            sessions,
            clock,
            settings.path(settings.sim.data_dir),
            time_scale=settings.sim.time_scale,
            storage_classes=settings.storage_classes,
        )
    if kind == "scsi":
        from tssd.backends.scsi.library import ScsiLibrary, emulated_settings

        scsi = settings.scsi
        if scsi.emulation_dir:
            scsi = emulated_settings(scsi, settings.path(scsi.emulation_dir))
        return ScsiLibrary(scsi, sessions, clock, settings.storage_classes)
    valid = ", ".join(repr(t) for t in BACKEND_TYPES)
    raise ConfigError(f"unknown backend.type {kind!r}: valid choices are {valid}")

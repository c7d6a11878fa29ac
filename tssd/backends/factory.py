"""Build the configured tape backend: the one place that knows every backend type."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tssd.backends.base import TapeBackend
from tssd.clock import Clock
from tssd.config import Settings
from tssd.db.engine import Sessions
from tssd.errors import ConfigError

Builder = Callable[[Settings, Sessions, Clock], TapeBackend]


def _sim(settings: Settings, sessions: Sessions, clock: Clock) -> TapeBackend:
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


def _scsi(settings: Settings, sessions: Sessions, clock: Clock) -> TapeBackend:
    from tssd.backends.scsi.library import ScsiLibrary, emulated_settings

    scsi = settings.scsi
    if scsi.emulation_dir:
        scsi = emulated_settings(scsi, settings.path(scsi.emulation_dir))
    return ScsiLibrary(scsi, sessions, clock, settings.storage_classes)


def _package(name: str) -> Builder:
    """``create(settings, sessions, clock)`` of ``tssd.backends.<name>.backend``, imported
    when first called: a backend is its package and its line in :data:`BUILDERS`."""

    def build(settings: Settings, sessions: Sessions, clock: Clock) -> TapeBackend:
        create: Builder = importlib.import_module(f"tssd.backends.{name}.backend").create
        return create(settings, sessions, clock)

    return build


BUILDERS: dict[str, Builder] = {
    "sim": _sim,
    "scsi": _scsi,
    "sp": _package("sp"),
}
BACKEND_TYPES = tuple(BUILDERS)


def create_backend(settings: Settings, sessions: Sessions, clock: Clock) -> TapeBackend:
    """The backend named by ``backend.type``; raises ConfigError for an unknown type."""
    kind = settings.backend.type
    try:
        build = BUILDERS[kind]
    except KeyError:
        valid = ", ".join(repr(t) for t in BACKEND_TYPES)
        raise ConfigError(f"unknown backend.type {kind!r}: valid choices are {valid}") from None
    return build(settings, sessions, clock)

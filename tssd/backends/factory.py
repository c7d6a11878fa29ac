"""Build the configured tape backend: the one place that knows every backend type.

A backend is its package ``tssd.backends.<name>`` with a ``backend.py`` whose
:data:`Builder` ``create(settings, catalogs, clock)`` builds it, plus its line in
:data:`BUILDERS`. What ``create`` is given is decided here, once: the settings, the
gateway to the catalogs kept in tssd's database (a backend takes its own tables from it,
or none) and the clock.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tssd.backends.base import TapeBackend
from tssd.backends.catalog import CatalogGateway
from tssd.clock import Clock
from tssd.config import Settings
from tssd.errors import ConfigError

Builder = Callable[[Settings, CatalogGateway, Clock], TapeBackend]


def _package(name: str) -> Builder:
    """``create`` of ``tssd.backends.<name>.backend``, imported when first called, so
    that a deployment with another backend never loads this one (nor the simulator)."""

    def build(settings: Settings, catalogs: CatalogGateway, clock: Clock) -> TapeBackend:
        create: Builder = importlib.import_module(f"tssd.backends.{name}.backend").create
        return create(settings, catalogs, clock)

    return build


BUILDERS: dict[str, Builder] = {
    "sim": _package("sim"),
    "scsi": _package("scsi"),
    "sp": _package("sp"),
}
BACKEND_TYPES = tuple(BUILDERS)


def create_backend(settings: Settings, catalogs: CatalogGateway, clock: Clock) -> TapeBackend:
    """The backend named by ``backend.type``; raises ConfigError for an unknown type."""
    kind = settings.backend.type
    try:
        build = BUILDERS[kind]
    except KeyError:
        valid = ", ".join(repr(t) for t in BACKEND_TYPES)
        raise ConfigError(f"unknown backend.type {kind!r}: valid choices are {valid}") from None
    return build(settings, catalogs, clock)

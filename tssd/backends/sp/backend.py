"""The SP backend's entry point for :mod:`tssd.backends.factory`."""

from __future__ import annotations

import dataclasses

from tssd.backends.base import TapeBackend
from tssd.backends.catalog import CatalogGateway
from tssd.clock import Clock
from tssd.config import Settings, SpSettings


def create(settings: Settings, catalogs: CatalogGateway, clock: Clock) -> TapeBackend:
    """The SP library of ``[sp]``; the server is its catalog, so *catalogs* go unused."""
    from tssd.backends.sp.library import SpLibrary

    del catalogs, clock
    return SpLibrary(sp_settings(settings))


def sp_settings(settings: Settings) -> SpSettings:
    """``[sp]`` with its paths' ``{home}`` expanded."""
    sp = settings.sp

    def path(value: str) -> str:
        return str(settings.path(value)) if value else ""

    sp = dataclasses.replace(
        sp,
        api_library=path(sp.api_library),
        options_file=path(sp.options_file),
        password_file=path(sp.password_file),
        dsmi_dir=path(sp.dsmi_dir),
        dsmi_log=path(sp.dsmi_log),
    )
    return sp

"""Typed, frozen settings.

Settings come from, in increasing precedence: the defaults in :mod:`tssd.config.sections`,
one TOML file (``--config PATH`` or ``TSSD_CONFIG``) and environment variables
``TSSD_<SECTION>_<KEY>`` (``TSSD_HOME`` for the state directory). Every field documents
itself through its ``doc`` metadata; ``tssd config`` prints them all with their values
and origin, ``tssd config --sample`` writes the documented sample file.

Paths may contain ``{home}``, replaced by the state directory.
"""

from tssd.config.backends import BackendSettings, ScsiSettings, SimSettings, SpSettings
from tssd.config.render import describe, sample_toml, to_toml
from tssd.config.sections import (
    ApiSettings,
    BackpressureSettings,
    ClusterSettings,
    DatabaseSettings,
    EnditDirectory,
    EnditSettings,
    HealthSettings,
    LogSettings,
    SchedulerSettings,
)
from tssd.config.settings import SECTIONS, Origin, Settings, load_settings
from tssd.shim.endpoint import DEFAULT_HOME

__all__ = [
    "DEFAULT_HOME",
    "SECTIONS",
    "ApiSettings",
    "BackendSettings",
    "BackpressureSettings",
    "ClusterSettings",
    "DatabaseSettings",
    "EnditDirectory",
    "EnditSettings",
    "HealthSettings",
    "LogSettings",
    "Origin",
    "SchedulerSettings",
    "ScsiSettings",
    "Settings",
    "SimSettings",
    "SpSettings",
    "describe",
    "load_settings",
    "sample_toml",
    "to_toml",
]

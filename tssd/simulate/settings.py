"""``tssd simulate --config PATH --set SECTION.KEY=VALUE``: a site's own settings on a campaign.

The configuration file is the one ``tssd serve`` reads; its ``[scheduler]`` settings and
the ``[sim]`` settings that describe the library (profile, drives, robot arms, seed, tape
capacity, true-layout spreads, error rates) act on the simulation. ``--set`` overrides one
setting of those sections; a command-line flag (``--profile``, ``--drives``, ...) wins
over both. Settings of other sections are read (and checked) but change nothing here.
The ``[[queues]]`` tables seed the simulation's queues as they seed those of ``tssd
serve`` (priority, drive limit, pause, latency target); the report gives each queue's
target and whether its p95 met it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

from tssd.config.settings import Origin, Settings, _coerce
from tssd.errors import ConfigError

#: Sections whose settings act on a simulation.
ACTING = ("scheduler", "sim")
#: [sim] settings the simulation itself decides (where the library lives, real time).
SIM_OWN = frozenset({"data_dir", "time_scale", "tapes", "drive_prefix"})
#: [sim] settings that are fields of :class:`~tssd.simulate.runner.Options`.
SIM_OPTIONS = ("profile", "drives", "robot_arms", "seed")
DEFAULTS = (None, "default")


def apply_sets(settings: Settings, origin: Origin, items: Sequence[str]) -> Settings:
    """*settings* with each ``SECTION.KEY=VALUE`` of *items* applied; *origin* records
    them as ``set``."""
    for item in items:
        name, sep, value = item.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot:
            raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE")
        if section not in ACTING:
            raise ConfigError(
                f"--set {item!r}: only [{'] and ['.join(ACTING)}] settings act on a simulation"
            )
        if section == "sim" and key in SIM_OWN:
            raise ConfigError(f"--set {item!r}: the simulation sets sim.{key} itself")
        current = getattr(settings, section)
        hints = typing.get_type_hints(type(current))
        if key not in hints:
            raise ConfigError(f"--set {item!r}: [{section}] has no setting {key!r}")
        coerced = _coerce(value, hints[key], f"{section}.{key}")
        settings = dataclasses.replace(
            settings, **{section: dataclasses.replace(current, **{key: coerced})}
        )
        origin[f"{section}.{key}"] = "set"
    return settings


def overrides(settings: Settings, origin: Origin) -> dict[str, Any]:
    """Options fields from the settings a file or ``--set`` gave (not defaults)."""

    def given(section: str) -> dict[str, Any]:
        values = dataclasses.asdict(getattr(settings, section))
        return {
            k: v for k, v in values.items() if origin.get(f"{section}.{k}", "default") != "default"
        }

    scheduler = given("scheduler")
    sim = {k: v for k, v in given("sim").items() if k not in SIM_OWN}
    out: dict[str, Any] = {k: sim.pop(k) for k in SIM_OPTIONS if k in sim}
    out["scheduler"] = tuple(sorted(scheduler.items()))
    out["sim"] = tuple(sorted(sim.items()))
    if settings.queues:
        out["queues"] = settings.queues
    return out

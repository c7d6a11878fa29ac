"""``[[queues]]`` tables: the queues a site configures, and their latency targets.

The same tables seed the ``queues`` table of ``tssd serve`` at start (create the missing
queues, apply the keys each table gives) and the queues of ``tssd simulate --config``.
``tssctl queues set`` changes a queue at run time; at the next start the keys a table
gives win again, the keys it leaves out keep their run-time value (docs/operations.md).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from typing import Any

from tssd.errors import ConfigError
from tssd.shim.names import QUEUE

#: Bounds of a latency target: a second to a year (a longer target is no target).
TARGET_MIN_S = 1.0
TARGET_MAX_S = 365 * 86400.0
#: Bounds shared with ``tssctl queues set`` and the API.
PRIORITY_BOUND = 1_000_000
MAX_DRIVES_MAX = 10_000
#: Most ``[[queues]]`` tables one file may hold.
QUEUES_MAX = 1000
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_KEYS = ("priority", "max_drives", "paused", "latency_target_s")


@dataclass(frozen=True)
class QueueSettings:
    """One ``[[queues]]`` table: a queue and the settings it fixes."""

    name: str
    priority: int = 0
    max_drives: int | None = None
    paused: bool = False
    latency_target_s: float | None = None
    #: The keys the table gave: only these are applied to an existing queue at start.
    given: frozenset[str] = field(default=frozenset())


def parse_duration(text: str) -> float:
    """Seconds of ``"3600"``, ``"90s"``, ``"15m"``, ``"1h"``, ``"1.5d"``; ValueError if not."""
    raw = text.strip().lower()
    scale = _UNITS.get(raw[-1:], 0.0)
    number = raw[:-1] if scale else raw
    try:
        value = float(number) * (scale or 1.0) if 0 < len(number) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"not a duration: {text!r} (seconds, or a number with s, m, h or d)")
    return value


def check_target(value: float, where: str) -> float:
    if not TARGET_MIN_S <= value <= TARGET_MAX_S:
        raise ConfigError(
            f"{where}: a latency target must be {TARGET_MIN_S:.0f} s to {TARGET_MAX_S:.0f} s"
            f" (365 d), got {value:g}"
        )
    return value


def load_queues(value: Any, where: str = "queues") -> tuple[QueueSettings, ...]:
    """The ``[[queues]]`` tables of a configuration (or a TOML inline array from the
    environment) as frozen settings; ConfigError on anything a site could mistype."""
    if isinstance(value, str):
        try:
            value = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not a TOML inline array of tables: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"{where}: expected [[queues]] tables, got {value!r}")
    if len(value) > QUEUES_MAX:
        raise ConfigError(f"{where}: at most {QUEUES_MAX} queues")
    out = tuple(_queue(t, f"{where}[{i}]") for i, t in enumerate(value))
    seen: set[str] = set()
    for q in out:
        if q.name in seen:
            raise ConfigError(f"{where}: queue {q.name!r} is configured twice")
        seen.add(q.name)
    return out


def _queue(table: dict[str, Any], where: str) -> QueueSettings:
    unknown = set(table) - {"name", *_KEYS}
    if unknown:
        raise ConfigError(f"unknown setting(s) in {where}: {', '.join(sorted(unknown))}")
    name = table.get("name")
    if not isinstance(name, str) or not QUEUE.fullmatch(name):
        raise ConfigError(f"{where}.name: {QUEUE.describe()}, got {name!r}")
    values: dict[str, Any] = {}
    if "priority" in table:
        values["priority"] = _int(table["priority"], f"{where}.priority", -PRIORITY_BOUND,
                                  PRIORITY_BOUND)  # fmt: skip
    if "max_drives" in table:
        values["max_drives"] = _max_drives(table["max_drives"], f"{where}.max_drives")
    if "paused" in table:
        if not isinstance(table["paused"], bool):
            raise ConfigError(f"{where}.paused: expected true or false, got {table['paused']!r}")
        values["paused"] = table["paused"]
    if "latency_target_s" in table:
        values["latency_target_s"] = _target(table["latency_target_s"], f"{where}.latency_target_s")
    return QueueSettings(name=name, given=frozenset(values), **values)


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{where}: expected an integer from {lo} to {hi}, got {value!r}")
    return value


def _max_drives(value: Any, where: str) -> int | None:
    # TOML has no null: "any" means no limit.
    if value == "any":
        return None
    return _int(value, where, 1, MAX_DRIVES_MAX)


def _target(value: Any, where: str) -> float | None:
    # TOML has no null: "none" means no target; a string may carry a unit ("1h").
    if isinstance(value, str):
        if value.strip().lower() == "none":
            return None
        try:
            value = parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(f'{where}: expected seconds or a duration such as "1h", got {value!r}')
    return check_target(float(value), where)

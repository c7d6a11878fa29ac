"""The settings root and how it is loaded: defaults, one TOML file, the environment."""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tssd.config.backends import BackendSettings, ScsiSettings, SimSettings, SpSettings
from tssd.config.queues import QueueSettings, load_queues
from tssd.config.sections import (
    ApiSettings,
    BackpressureSettings,
    ClusterSettings,
    DatabaseSettings,
    DeliverySettings,
    EnditSettings,
    HealthSettings,
    LimitsSettings,
    LogSettings,
    SchedulerSettings,
    _doc,
)
from tssd.config.storage_classes import (
    DEFAULT_STORAGE_CLASSES,
    StorageClassSettings,
    load_storage_classes,
)
from tssd.errors import ConfigError
from tssd.shim.endpoint import DEFAULT_HOME


@dataclass(frozen=True)
class Settings:
    home: str = field(
        default=DEFAULT_HOME, metadata=_doc("State directory ($TSSD_HOME): database, socket.")
    )
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    limits: LimitsSettings = field(default_factory=LimitsSettings)
    backend: BackendSettings = field(default_factory=BackendSettings)
    sim: SimSettings = field(default_factory=SimSettings)
    scsi: ScsiSettings = field(default_factory=ScsiSettings)
    sp: SpSettings = field(default_factory=SpSettings)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    log: LogSettings = field(default_factory=LogSettings)
    endit: EnditSettings = field(default_factory=EnditSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    backpressure: BackpressureSettings = field(default_factory=BackpressureSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    #: ``[[queues]]`` tables (tssd/config/queues.py): queues seeded at start.
    queues: tuple[QueueSettings, ...] = ()
    #: ``[[storage_classes]]`` tables (tssd/config/storage_classes.py): the classes whose
    #: migrations tssd takes, and the cartridges they may hold.
    storage_classes: tuple[StorageClassSettings, ...] = DEFAULT_STORAGE_CLASSES

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser()

    def path(self, template: str) -> Path:
        """Expand ``{home}`` and ``~`` in a path setting."""
        return Path(template.replace("{home}", str(self.home_path))).expanduser()

    @property
    def database_url(self) -> str:
        return self.database.url.replace("{home}", str(self.home_path))


SECTIONS: dict[str, type[Any]] = {
    f.name: typing.get_type_hints(Settings)[f.name]
    for f in dataclasses.fields(Settings)
    if f.name not in ("home", "queues", "storage_classes")
}


def _coerce(value: Any, typ: Any, where: str) -> Any:
    if typing.get_origin(typ) is tuple:
        return _coerce_tables(value, typing.get_args(typ)[0], where)
    if isinstance(typ, types.UnionType):
        typ = next(t for t in typing.get_args(typ) if t is not type(None))
    if isinstance(value, str) and typ is not str:
        value = _parse_text(value, typ, where)
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {typ.__name__}, got {value!r}")
    return value


def _coerce_tables(value: Any, cls: type[Any], where: str) -> tuple[Any, ...]:
    """A list of TOML tables as a tuple of *cls*; from the environment, a TOML inline array."""
    if isinstance(value, str):
        try:
            value = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not a TOML inline array of tables: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"{where}: expected a list of tables, got {value!r}")
    return tuple(_build_table(cls, t, f"{where}[{i}]") for i, t in enumerate(value))


def _build_table(cls: type[Any], table: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    unknown = set(table) - set(hints)
    if unknown:
        raise ConfigError(f"unknown setting(s) in {where}: {', '.join(sorted(unknown))}")
    return cls(**{k: _coerce(v, hints[k], f"{where}.{k}") for k, v in table.items()})


def _parse_text(text: str, typ: Any, where: str) -> Any:
    try:
        if typ is bool:
            lowered = text.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(text)
        if typ is int:
            return int(text, 0)
        if typ is float:
            return float(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: cannot read {text!r} as {typ.__name__}") from exc
    return text


Origin = dict[str, str]


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Settings, Origin]:
    """Build the settings; return them with the origin (default/file/env) of each key."""
    env = os.environ if environ is None else environ
    path = config_path or env.get("TSSD_CONFIG")
    data: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    origin: Origin = {}
    origin["home"] = "file" if path and "home" in data else "default"
    home = _coerce(data.pop("home", DEFAULT_HOME), str, "home")
    if "TSSD_HOME" in env:
        home, origin["home"] = env["TSSD_HOME"], "env"
    # Recorded only when given: [[queues]] is a list of tables, not a setting with a default.
    if "queues" in data:
        origin["queues"] = "file"
    queues = load_queues(data.pop("queues", []))
    if "TSSD_QUEUES" in env:
        queues, origin["queues"] = load_queues(env["TSSD_QUEUES"], "TSSD_QUEUES"), "env"
    classes = DEFAULT_STORAGE_CLASSES
    if "storage_classes" in data:
        origin["storage_classes"] = "file"
        classes = load_storage_classes(data.pop("storage_classes"))
    if "TSSD_STORAGE_CLASSES" in env:
        classes = load_storage_classes(env["TSSD_STORAGE_CLASSES"], "TSSD_STORAGE_CLASSES")
        origin["storage_classes"] = "env"
    sections: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        table = data.pop(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{name}] must be a table")
        sections[name] = _build_section(name, cls, table, env, origin)
    if data:
        raise ConfigError(f"unknown setting(s) in {path}: {', '.join(sorted(data))}")
    _check_environment(env)
    return Settings(home=home, queues=queues, storage_classes=classes, **sections), origin


#: TSSD_* variables that are no setting of a section: the clients' and the loader's own.
ENVIRONMENT = frozenset({"TSSD_HOME", "TSSD_CONFIG", "TSSD_QUEUES", "TSSD_STORAGE_CLASSES",
                         "TSSD_URL", "TSSD_TOKEN_FILE"})  # fmt: skip


def environment_names() -> frozenset[str]:
    """Every TSSD_* name tssd reads."""
    keys = {f"TSSD_{n.upper()}_{f.name.upper()}" for n, c in SECTIONS.items()
            for f in dataclasses.fields(c)}  # fmt: skip
    return ENVIRONMENT | keys


def _check_environment(env: Mapping[str, str]) -> None:
    """A misspelt TSSD_<SECTION>_<KEY> is refused like a misspelt TOML key, not ignored.

    A name is taken for a setting when it starts with a section's prefix or is close to a
    real name; other TSSD_* variables (a test harness's, a site's scripts') pass.
    """
    names = environment_names()
    prefixes = tuple(f"TSSD_{name.upper()}_" for name in SECTIONS)
    typos = []
    for name in sorted(k for k in env if k.startswith("TSSD_") and k not in names):
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.85)
        if close or name.startswith(prefixes):
            typos.append(f"{name} (did you mean {close[0]}?)" if close else name)
    if typos:
        raise ConfigError(
            f"unknown setting(s) in the environment: {', '.join(typos)}; `tssd config` "
            "lists every setting, the variable of [section] key is TSSD_SECTION_KEY"
        )


def _build_section(
    name: str, cls: type[Any], table: dict[str, Any], env: Mapping[str, str], origin: Origin
) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"unknown setting(s) in [{name}]: {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for key in known:
        where = f"{name}.{key}"
        env_key = f"TSSD_{name.upper()}_{key.upper()}"
        if env_key in env:
            values[key] = _coerce(env[env_key], hints[key], env_key)
            origin[where] = "env"
        elif key in table:
            values[key] = _coerce(table[key], hints[key], where)
            origin[where] = "file"
        else:
            origin[where] = "default"
    return cls(**values)

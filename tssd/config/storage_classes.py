"""``[[storage_classes]]`` tables: the storage classes that may claim empty cartridges.

Found by attack: 1-byte migrations in storage classes nobody uses took a whole empty
cartridge each (a tape holds one class), until a real class's put failed "library full".
A migration of a class no table admits is refused at submit; the classes one table
admits (a name, or a pattern such as ``"cms:*"``) hold at most its ``max_tapes``
cartridges together. The embedded default admits ``atlas:tape`` alone, the class of the
README's walk-through (docs/backends.md, "Storage classes and cartridges").
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tssd.errors import ConfigError, PermanentBackendError, TssdError

#: Most ``[[storage_classes]]`` tables one file may hold.
STORAGE_CLASSES_MAX = 1000
#: A name: a storage class (``store:group``, optionally ``@hsm``) or a pattern of one.
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:@/+-*?")
_KEYS = ("name", "max_tapes")
MAX_TAPES_MAX = 10_000_000


class StorageClassRefused(TssdError):
    """A migration of a storage class no ``[[storage_classes]]`` table admits.

    Exit 1 (dCache flushes it again later): a class missing from the list is the
    installation's to fix, not the file's."""

    exit_code = 1


@dataclass(frozen=True)
class StorageClassSettings:
    """One ``[[storage_classes]]`` table."""

    #: A storage class, or a pattern (``*`` any characters, ``?`` one).
    name: str
    #: The most cartridges the classes this table admits may hold together (filling and
    #: full); 0 = no bound but the library's. A pattern must give one.
    max_tapes: int = 0

    @property
    def pattern(self) -> bool:
        return "*" in self.name or "?" in self.name

    def admits(self, storage_class: str) -> bool:
        """Whether *storage_class* (with or without its ``@hsm``) is this table's."""
        bare = storage_class.partition("@")[0]
        if not self.pattern:
            return self.name in (storage_class, bare)
        return fnmatch.fnmatchcase(storage_class, self.name) or fnmatch.fnmatchcase(bare, self.name)


#: The embedded default: the README's storage class, unbounded.
DEFAULT_STORAGE_CLASSES: tuple[StorageClassSettings, ...] = (
    StorageClassSettings(name="atlas:tape"),
)


def entry_for(
    tables: tuple[StorageClassSettings, ...], storage_class: str
) -> StorageClassSettings | None:
    """The table that admits *storage_class*: a name before any pattern, then the first
    pattern in file order; None if none does."""
    exact = [t for t in tables if not t.pattern and t.admits(storage_class)]
    return next(iter(exact), None) or next((t for t in tables if t.admits(storage_class)), None)


def check_admitted(tables: tuple[StorageClassSettings, ...], storage_class: str) -> None:
    """Raise :class:`StorageClassRefused` unless a table admits *storage_class*."""
    if entry_for(tables, storage_class) is None:
        names = ", ".join(repr(t.name) for t in tables[:10]) or "none"
        raise StorageClassRefused(
            f"storage class {storage_class!r} may not claim tape cartridges here: no "
            f"[[storage_classes]] table admits it (admitted: {names}); add "
            f'[[storage_classes]] name = "{storage_class.partition("@")[0]}" to the '
            "configuration and restart tssd"
        )


def load_storage_classes(
    value: Any, where: str = "storage_classes"
) -> tuple[StorageClassSettings, ...]:
    """The ``[[storage_classes]]`` tables (or a TOML inline array from the environment)."""
    if isinstance(value, str):
        try:
            value = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not a TOML inline array of tables: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise ConfigError(f"{where}: expected [[storage_classes]] tables, got {value!r}")
    if len(value) > STORAGE_CLASSES_MAX:
        raise ConfigError(f"{where}: at most {STORAGE_CLASSES_MAX} storage classes")
    out = tuple(_table(t, f"{where}[{i}]") for i, t in enumerate(value))
    seen: set[str] = set()
    for entry in out:
        if entry.name in seen:
            raise ConfigError(f"{where}: storage class {entry.name!r} is configured twice")
        seen.add(entry.name)
    return out


def _table(table: dict[str, Any], where: str) -> StorageClassSettings:
    unknown = set(table) - set(_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting(s) in {where}: {', '.join(sorted(unknown))}")
    name = table.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 255 or set(name) - _NAME_CHARS:
        raise ConfigError(
            f'{where}.name: a storage class such as "atlas:tape" or a pattern such as '
            f'"cms:*" (letters, digits, _.:@/+- and * ?), got {name!r}'
        )
    max_tapes = table.get("max_tapes", 0)
    if (
        not isinstance(max_tapes, int)
        or isinstance(max_tapes, bool)
        or not (0 <= max_tapes <= MAX_TAPES_MAX)
    ):
        raise ConfigError(f"{where}.max_tapes: expected an integer from 0 to {MAX_TAPES_MAX}")
    entry = StorageClassSettings(name=name, max_tapes=max_tapes)
    if entry.pattern and not max_tapes:
        raise ConfigError(
            f"{where}: the pattern {name!r} admits storage classes nobody listed; give it "
            "max_tapes, the most cartridges they may hold together"
        )
    return entry


def claim_refusal(
    tables: tuple[StorageClassSettings, ...],
    storage_class: str,
    held: dict[str | None, int],
) -> str | None:
    """Why *storage_class* may not claim an empty cartridge, given the cartridges each
    class holds now (*held*); None if it may."""
    entry = entry_for(tables, storage_class)
    if entry is None:
        return "no [[storage_classes]] table admits it"
    if not entry.max_tapes:
        return None
    ours = sum(n for sc, n in held.items() if sc and entry_for(tables, sc) == entry)
    if ours < entry.max_tapes:
        return None
    return (
        f"the classes of [[storage_classes]] {entry.name!r} hold {ours} cartridges "
        f"(max_tapes = {entry.max_tapes})"
    )


def claim_guard(
    tables: tuple[StorageClassSettings, ...] | None, storage_class: str
) -> Callable[[dict[str | None, int]], None] | None:
    """What a backend calls before it gives *storage_class* an empty cartridge: raises
    :class:`~tssd.errors.PermanentBackendError` with :func:`claim_refusal`'s reason.
    None (no rule) for a backend made without the tables (tests of the backend alone)."""
    if tables is None:
        return None

    def check(held: dict[str | None, int]) -> None:
        why = claim_refusal(tables, storage_class, held)
        if why is not None:
            raise PermanentBackendError(
                f"storage class {storage_class!r} may claim no empty cartridge: {why}"
            )

    return check

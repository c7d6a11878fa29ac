"""``[[storage_classes]]``: which storage classes may claim empty cartridges, and how many
the classes of one table hold together (tssd/config/storage_classes.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tssd.config.render import sample_toml, to_toml
from tssd.config.settings import load_settings
from tssd.config.storage_classes import (
    DEFAULT_STORAGE_CLASSES,
    StorageClassRefused,
    check_admitted,
    claim_refusal,
    entry_for,
    load_storage_classes,
)
from tssd.errors import ConfigError

SITE = """
[[storage_classes]]
name = "atlas:tape"

[[storage_classes]]
name = "cms:*"
max_tapes = 3

[[storage_classes]]
name = "cms:raw"
"""


def test_the_default_admits_the_walk_through_class_alone() -> None:
    settings, _ = load_settings(None, {})
    assert settings.storage_classes == DEFAULT_STORAGE_CLASSES
    check_admitted(settings.storage_classes, "atlas:tape")
    check_admitted(settings.storage_classes, "atlas:tape@osm")
    with pytest.raises(StorageClassRefused, match=r"\[\[storage_classes\]\]") as refused:
        check_admitted(settings.storage_classes, "junk:c1@osm")
    assert refused.value.exit_code == 1  # an installation's fault: dCache flushes again
    assert 'name = "junk:c1"' in str(refused.value)


def test_a_site_lists_its_classes_in_the_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "tssd.toml"
    config.write_text(SITE)
    settings, origin = load_settings(str(config), {})
    tables = settings.storage_classes
    assert [(t.name, t.max_tapes) for t in tables] == [
        ("atlas:tape", 0), ("cms:*", 3), ("cms:raw", 0),
    ]  # fmt: skip
    assert origin["storage_classes"] == "file"
    # A name wins over a pattern; the pattern takes the rest of its classes.
    assert entry_for(tables, "cms:raw@osm") == tables[2]
    assert entry_for(tables, "cms:user") == tables[1]
    assert entry_for(tables, "lhcb:raw") is None
    env = {"TSSD_STORAGE_CLASSES": '[{name = "lhcb:raw"}]'}
    settings, origin = load_settings(str(config), env)
    assert [t.name for t in settings.storage_classes] == ["lhcb:raw"]
    assert origin["storage_classes"] == "env"
    # What `tssd config` prints reads back as the same tables.
    again = tomllib.loads(to_toml(*load_settings(str(config), {})))["storage_classes"]
    assert load_storage_classes(again) == tables


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ([{"name": "user:*"}], "give it max_tapes"),
        ([{"name": "a:b", "tapes": 3}], "unknown setting"),
        ([{"name": "a:b"}, {"name": "a:b"}], "configured twice"),
        ([{"name": "a b"}], "storage class such as"),
        ([{"name": "a:b", "max_tapes": -1}], "max_tapes"),
        ([{"name": "a:b", "max_tapes": True}], "max_tapes"),
        ("[{name = ", "TOML inline array"),
    ],
)
def test_mistyped_tables_are_config_errors(tables: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_storage_classes(tables)


def test_the_classes_of_a_pattern_share_its_max_tapes() -> None:
    tables = load_storage_classes(tomllib.loads(SITE)["storage_classes"])
    held: dict[str | None, int] = {"cms:a": 1, "cms:b@osm": 2, "cms:raw": 5, None: 9}
    why = claim_refusal(tables, "cms:c", held)
    assert why is not None and "'cms:*' hold 3 cartridges (max_tapes = 3)" in why
    assert claim_refusal(tables, "cms:raw", held) is None  # its own table: unbounded
    assert claim_refusal(tables, "atlas:tape", held) is None
    assert claim_refusal(tables, "cms:c", {"cms:a": 2, None: 9}) is None
    assert "no [[storage_classes]] table" in str(claim_refusal(tables, "lhcb:x", {}))


def test_the_sample_shows_how_to_list_classes() -> None:
    sample = sample_toml()
    assert '#   [[storage_classes]]\n#   name = "atlas:tape"' in sample
    assert '#   name = "cms:*"\n#   max_tapes = 40' in sample

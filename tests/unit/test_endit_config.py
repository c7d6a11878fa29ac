"""The [endit] settings: a list of directory tables, from TOML and from the environment."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tssd.config import EnditDirectory, load_settings, to_toml
from tssd.errors import ConfigError


def test_directories_from_toml_tables(tmp_path: Path) -> None:
    path = tmp_path / "tssd.toml"
    path.write_text(
        "[endit]\nrescan_s = 5\n"
        '[[endit.directories]]\npath = "/a"\nhsm_name = "pool1"\npriority = 3\n'
        '[[endit.directories]]\npath = "/b"\nqueue = "q"\n'
    )
    settings, origin = load_settings(path, environ={})
    assert settings.endit.directories == (
        EnditDirectory(path="/a", hsm_name="pool1", priority=3),
        EnditDirectory(path="/b", queue="q"),
    )
    assert settings.endit.rescan_s == 5.0
    assert origin["endit.directories"] == "file"


def test_directories_from_environment_inline_array() -> None:
    env = {"TSSD_ENDIT_DIRECTORIES": '[{path = "/c", priority = "7"}]'}
    settings, origin = load_settings(None, environ=env)
    assert settings.endit.directories == (EnditDirectory(path="/c", priority=7),)
    assert origin["endit.directories"] == "env"


@pytest.mark.parametrize(
    "value",
    ['[{path = "/c", colour = "red"}]', '["/c"]', "not toml [", '[{priority = "x"}]'],
)
def test_bad_directories_are_refused(value: str) -> None:
    with pytest.raises(ConfigError):
        load_settings(None, environ={"TSSD_ENDIT_DIRECTORIES": value})


def test_rendered_config_reads_back(tmp_path: Path) -> None:
    env = {"TSSD_ENDIT_DIRECTORIES": '[{path = "/c", hsm_name = "p"}, {path = "/d"}]'}
    settings, _ = load_settings(None, environ=env)
    text = to_toml(settings)
    tomllib.loads(text)  # valid TOML
    path = tmp_path / "again.toml"
    path.write_text(text)
    again, _ = load_settings(path, environ={})
    assert again.endit == settings.endit


def test_default_is_off() -> None:
    settings, _ = load_settings(None, environ={})
    assert settings.endit.directories == ()

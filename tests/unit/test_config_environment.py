"""A misspelt TSSD_* variable is refused like a misspelt TOML key, not silently ignored."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tssd.config import load_settings
from tssd.errors import ConfigError
from tssd.testing import BIN


def test_an_unknown_setting_variable_is_refused_with_the_name_it_resembles() -> None:
    with pytest.raises(ConfigError, match=r"TSSD_SIM_DRIVERS \(did you mean TSSD_SIM_DRIVES\?\)"):
        load_settings(environ={"TSSD_SIM_DRIVERS": "2"})
    with pytest.raises(ConfigError, match=r"unknown setting.* TSSD_API_NOSUCHKEY"):
        load_settings(environ={"TSSD_API_NOSUCHKEY": "1"})
    # The real names, the clients' variables and a harness's own TSSD_* variable pass.
    names = {"TSSD_SIM_DRIVES": "2", "TSSD_URL": "x", "TSSD_TOKEN_FILE": "t", "TSSD_TEST_PG": "1"}
    settings, _ = load_settings(environ=names)
    assert settings.sim.drives == 2


def test_tssd_config_reports_it_like_a_toml_typo(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}
    env["TSSD_HOME"] = str(tmp_path)
    toml = tmp_path / "tssd.toml"
    toml.write_text("[sim]\ndrivers = 2\n")
    typo_in_file = subprocess.run(
        [str(BIN / "tssd"), "--config", str(toml), "config"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    typo_in_env = subprocess.run(
        [str(BIN / "tssd"), "config"],
        env=env | {"TSSD_SIM_DRIVERS": "2"}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert typo_in_file.returncode == typo_in_env.returncode != 0
    assert "unknown setting(s) in [sim]: drivers" in typo_in_file.stderr
    assert "unknown setting(s) in the environment: TSSD_SIM_DRIVERS" in typo_in_env.stderr
    assert typo_in_env.stdout == ""

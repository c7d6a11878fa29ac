"""``tssd simulate --config PATH --set SECTION.KEY=VALUE`` (issue 18.5)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from tssd.cli.daemon import _simulate_options, build_parser, main


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    # main() configures logging onto pytest's captured stderr, which is closed after the
    # test: later tests would log into a closed file.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def options(tmp_path: Path, *argv: str) -> object:
    args = build_parser().parse_args(
        ["simulate", "--catalog", str(tmp_path / "c.csv"), "--requests", str(tmp_path / "r.csv"),
         *argv]
    )  # fmt: skip
    return _simulate_options(args)


def test_config_file_sets_and_flags_in_that_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TSSD_CONFIG", raising=False)
    config = tmp_path / "tssd.toml"
    config.write_text(
        '[scheduler]\nrao = "off"\nfill_wait_s = 600.0\n'
        '[sim]\nprofile = "gridka-t10k"\ndrives = 4\nlayout_spread = 0.0\ndata_dir = "/x"\n'
        '[api]\nsocket = "/tmp/ignored.sock"\n'
    )
    got = options(tmp_path, "--config", str(config), "--set", "scheduler.fill_wait_s=60",
                  "--set", "sim.file_spread=0", "--drives", "6")  # fmt: skip
    assert got.profile == "gridka-t10k"  # type: ignore[attr-defined]
    assert got.drives == 6  # type: ignore[attr-defined]  # the flag wins
    assert dict(got.scheduler) == {"rao": "off", "fill_wait_s": 60.0}  # type: ignore[attr-defined]
    assert dict(got.sim) == {"layout_spread": 0.0, "file_spread": 0.0}  # type: ignore[attr-defined]
    plain = options(tmp_path)
    assert (plain.profile, plain.drives, plain.scheduler, plain.sim) == ("lto9", 10, (), ())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("scheduler.rao", "SECTION.KEY=VALUE"),
        ("api.socket=/x", "act on a simulation"),
        ("sim.data_dir=/x", "sets sim.data_dir itself"),
        ("scheduler.nope=1", "no setting 'nope'"),
        ("scheduler.fill_wait_s=soon", "cannot read"),
    ],
)
def test_bad_set_is_a_configuration_error(
    tmp_path: Path, item: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--catalog", str(tmp_path / "c.csv"), "--requests",
            str(tmp_path / "r.csv"), "--set", item]  # fmt: skip
    assert main(argv) == 3
    assert message in capsys.readouterr().err

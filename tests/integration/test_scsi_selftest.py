"""``tssctl backend selftest`` as an operator runs it: a real tssctl subprocess against an
emulated library created by ``python3 -m tssd.backends.scsi.emulated init``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tssd.backends.scsi import emulated
from tssd.backends.scsi.emulated import FileTape
from tssd.backends.scsi.format import VolumeLabel, pack_label

STEPS = ["inventory", "drives", "load", "label", "write", "locate+read", "unload"]


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TSSD_HOME": str(home)}
    env.pop("TSSD_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "tssd.cli.tssctl", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def make_library(tmp_path: Path) -> Path:
    out = subprocess.run(
        [sys.executable, "-m", "tssd.backends.scsi.emulated", "init", str(tmp_path / "vtl")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    config = tmp_path / "tssd.toml"
    config.write_text(out + "block_size = 65536\n")
    return config


def test_selftest_on_emulated_library(tmp_path: Path) -> None:
    config = make_library(tmp_path)
    done = run(
        "backend",
        "selftest",
        "--config",
        str(config),
        "--volume",
        "E01003L8",
        "--json",
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)
    assert [s["step"] for s in steps] == STEPS
    assert all(s["ok"] for s in steps)
    state = emulated.load_state(tmp_path / "vtl")
    assert state["slots"][2]["volume"] == "E01003L8"
    assert all(d["volume"] is None for d in state["drives"])


def test_selftest_refuses_a_tape_with_data(tmp_path: Path) -> None:
    config = make_library(tmp_path)
    root = tmp_path / "vtl"
    state = emulated.load_state(root)
    state["drives"][0].update(volume="E01001L8", source=1)
    state["slots"][0]["volume"] = None
    emulated.save_state(root, state)
    tape = FileTape(str(root / "nst0"))
    tape.write_block(pack_label(VolumeLabel("E01001L8", 65536, "2026-01-01T00:00:00")))
    tape.write_filemark()
    tape.close()
    state["drives"][0].update(volume=None, source=None)
    state["slots"][0]["volume"] = "E01001L8"
    emulated.save_state(root, state)

    done = run(
        "backend", "selftest", "--config", str(config), "--volume", "E01001L8", home=tmp_path
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["inventory", "drives", "load", "label", "unload"]
    assert lines[3].startswith("FAIL") and "may hold data" in lines[3]
    assert lines[4].startswith("ok")
    assert emulated.load_state(root)["slots"][0]["volume"] == "E01001L8"


def test_selftest_needs_the_scsi_backend(tmp_path: Path) -> None:
    config = tmp_path / "tssd.toml"
    config.write_text('[backend]\ntype = "sim"\n')
    done = run("backend", "selftest", "--config", str(config), "--volume", "X", home=tmp_path)
    assert done.returncode == 2
    assert "for 'scsi'" in done.stderr

"""``tssctl backend selftest`` on sp as an operator runs it: a real tssctl subprocess, the
configuration file naming the stand-in library (tssd/backends/sp/standin) and its
server directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tssd.backends.sp.selftest import STEPS
from tssd.backends.sp.standin import LIBRARY_NAME, ServerSettings, make_server

pytestmark = pytest.mark.sp


def tssctl(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TSSD_", "DSMI_"))}
    env["TSSD_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "tssd.cli.tssctl", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def config(tmp_path: Path, build: Path, **server: object) -> Path:
    options = make_server(tmp_path / "server", ServerSettings(**server))  # type: ignore[arg-type]
    path = tmp_path / "tssd.toml"
    path.write_text(
        '[backend]\ntype = "sp"\n\n[sp]\n'
        f'api_library = "{build / LIBRARY_NAME}"\noptions_file = "{options}"\nnode = "TSSD"\n'
    )
    return path


def test_selftest_on_the_stand_in(tmp_path: Path, sp_build: Path) -> None:
    path = config(tmp_path, sp_build, capacity_bytes=2 << 20)
    done = tssctl("backend", "selftest", "--config", str(path), "--json", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    steps = json.loads(done.stdout)
    assert [s["step"] for s in steps] == list(STEPS)
    assert all(s["ok"] for s in steps), steps
    # Three 1 MiB objects on 2 MiB volumes: read back from two volumes, then deleted.
    assert "SP0000" in steps[2]["detail"]
    assert not list((tmp_path / "server" / "objects").glob("*.data"))


def test_selftest_reports_a_node_that_cannot_sign_on(tmp_path: Path, sp_build: Path) -> None:
    path = config(tmp_path, sp_build, transient_rate=1.0, transient_codes=(53,))
    done = tssctl("backend", "selftest", "--config", str(path), "--json", home=tmp_path)
    assert done.returncode == 1
    steps = json.loads(done.stdout)
    assert [(s["step"], s["ok"]) for s in steps] == [("sign-on", False)]
    assert "rc 53" in steps[0]["detail"]

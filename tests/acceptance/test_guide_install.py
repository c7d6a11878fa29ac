"""The production install of docs/guide/1-install.md, run as a new reader would run it.

Every block of the page marked ``<!-- guide:run -->`` runs here, in order, with bash, in a
scratch root that stands in for ``/``: ``/opt/tssd``, ``/etc/tssd``, ``/srv/dcache``,
``/var/lib/tssd`` and ``/run/tssd`` are rewritten into it. The blocks marked
``<!-- guide:root -->`` need root and a running systemd; the test does what they do
instead: a fresh PostgreSQL database for ``createdb``, and the daemon started as
deploy/tssd.service starts it (its ``Environment=`` lines and ``ExecStart=``, parsed from
the unit, with the paths rewritten). The simulated library stands in for the tape library.
"""

from __future__ import annotations

import grp
import os
import re
import shlex
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tssd.testing import wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "1-install.md"
UNIT = ROOT / "deploy" / "tssd.service"
PREFIXES = ("/opt/tssd", "/etc/tssd", "/srv/dcache", "/var/lib/tssd", "/run/tssd")
EXAMPLE_DB = "postgresql+asyncpg://tssd@db.example.org/tssd"
#: The guide's pool group and metrics port; the test's own group and a free port here.
EXAMPLE_GROUP = 'socket_group = "dcache"'
EXAMPLE_METRICS = "127.0.0.1:9708"


def guide_blocks() -> list[tuple[str, str]]:
    """(marker, shell text) of every marked block, in page order."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.findall(r"<!-- guide:(run|root) -->\n```sh\n(.*?)\n```", text, flags=re.S)
    return [(kind, body) for kind, body in found]


def unit_service() -> tuple[dict[str, str], list[str]]:
    """The unit's environment and its ExecStart as an argument list."""
    env: dict[str, str] = {}
    command: list[str] = []
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if line.startswith("Environment="):
            key, _, value = line.removeprefix("Environment=").partition("=")
            env[key] = value
        elif line.startswith("ExecStart="):
            command = shlex.split(line.removeprefix("ExecStart="))
    return env, command


class Scratch:
    """A root directory for the guide's absolute paths."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.root = root
        self.db_url = db_url
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.metrics = f"127.0.0.1:{probe.getsockname()[1]}"

    def path(self, text: str) -> str:
        for prefix in PREFIXES:
            text = text.replace(prefix, f"{self.root}{prefix}")
        group = grp.getgrgid(os.getgid()).gr_name
        text = text.replace(EXAMPLE_GROUP, f'socket_group = "{group}"')
        return text.replace(EXAMPLE_DB, self.db_url).replace(EXAMPLE_METRICS, self.metrics)

    def bash(self, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.path(script)],
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
        )


def test_the_guide_blocks_are_the_ones_this_test_knows() -> None:
    kinds = [kind for kind, _ in guide_blocks()]
    assert kinds == ["run", "root", "run", "run", "root", "run"]
    roots = [body for kind, body in guide_blocks() if kind == "root"]
    assert "createdb" in roots[0]
    assert "systemctl enable --now tssd" in roots[1]


def test_a_production_install_from_the_guide(tmp_path: Path, pg_url: str) -> None:
    scratch = Scratch(tmp_path, pg_url)
    for prefix in ("/srv/dcache", "/var/lib/tssd", "/run/tssd"):
        Path(scratch.path(prefix)).mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TSSD_", "VIRTUAL_ENV"))}
    env["PATH"] = "/usr/bin:/bin:" + env.get("PATH", "")
    unit_env, command = unit_service()
    daemon: subprocess.Popen[bytes] | None = None
    try:
        for kind, body in guide_blocks():
            if kind == "root" and "systemctl" in body:
                daemon = start_as_the_unit(scratch, env, unit_env, command)
                # The pool's user reaches the socket the unit names; here below the scratch.
                env["TSSD_URL"] = "unix:" + scratch.path(unit_env["TSSD_API_SOCKET"])
                continue
            if kind == "root":
                continue  # createdb: pg_url is that database
            result = scratch.bash(body, env)
            assert result.returncode == 0, f"{body}\n--- stdout\n{result.stdout}\n{result.stderr}"
            if "pip install" in body:
                assert result.stdout.strip().endswith("installed")
            if "tss-hsm get" in body:
                assert "recalled intact" in result.stdout
                # Prometheus' target: the metrics listener of the configuration.
                with urllib.request.urlopen(f"http://{scratch.metrics}/metrics", timeout=10) as r:
                    assert b"tssd_requests_total" in r.read()
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=120)
    assert daemon is not None and daemon.returncode == 0


def start_as_the_unit(
    scratch: Scratch, env: dict[str, str], unit_env: dict[str, str], command: list[str]
) -> subprocess.Popen[bytes]:
    service_env = env | {k: scratch.path(v) for k, v in unit_env.items()}
    service_env["TSSD_SIM_TIME_SCALE"] = "0.001"
    log = scratch.root / "tssd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [scratch.path(arg) for arg in command],
            env=service_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    socket = Path(service_env["TSSD_API_SOCKET"])
    wait_ready(proc, socket, 120, lambda: log.read_text(errors="replace")[-5000:])
    return proc

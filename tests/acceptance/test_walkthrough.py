"""The README's walk-through, as written, against the two ways tssd is started.

(a) ``tssd serve`` on the embedded default (no configuration: SQLite, the simulated
    library, the socket in ``$TSSD_HOME``), the tools finding it through ``$TSSD_HOME``;
(b) the daemon as ``deploy/tssd.service`` starts it: its ``ExecStart=`` command, its
    ``Environment=`` and ``deploy/tssd.toml`` as ``/etc/tssd/tssd.toml``, every absolute
    path of the unit moved below a temporary root (``/var/lib/tssd``, ``/run/tssd``,
    ``/srv/dcache``, ``/etc/tssd``), the sim backend (the toml's default) standing in for
    the library.

The commands are the README's shell block itself (put, get, cmp, the .crcval, status,
requests list, recall --file-list --wait, mounts, report --plot, top, remove), run by
bash with ``set -e``: a README that stops working fails here. Both daemons get the same
two test-speed settings (simulated hardware 2,000 times faster, a short scheduler tick)
and a free metrics port (the default 9708 is shared by every test on the machine).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tssd.testing import BIN, stop_serve, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "tssd.service"
FAST = {"TSSD_SIM_TIME_SCALE": "0.0005", "TSSD_SCHEDULER_TICK_S": "0.2"}


def readme_walkthrough() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.partition("## One-minute walk-through")[2]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README has no walk-through block"
    return block[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}
    env["HOME"] = str(tmp / "operator")  # nothing of the real user's state directory
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


def unit_lines() -> list[tuple[str, str]]:
    """(key, value) of every setting line of the unit, in order (Environment= repeats)."""
    found = []
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.append((key, value))
    return found


class Started:
    """One daemon, its environment for the walk-through shell and its log."""

    def __init__(self, argv: list[str], env: dict[str, str], sock: Path, shell_env: dict[str, str],
                 pool: Path, tmp: Path) -> None:  # fmt: skip
        self.port = free_port()
        self.env = env | FAST | {"TSSD_API_METRICS_TCP": f"127.0.0.1:{self.port}"}
        self.sock, self.shell_env, self.pool, self.tmp = sock, shell_env, pool, tmp
        self.moved_pool = False  # the README's own POOL= line finds the pool
        self.log = tmp / "tssd.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        wait_ready(self.proc, sock, 60, lambda: self.log.read_text(errors="replace"))


def embedded(tmp: Path) -> Started:
    """(a): `tssd serve`, nothing configured but where its state lives."""
    home = tmp / "state"
    env = clean_env(tmp) | {"TSSD_HOME": str(home)}
    argv = [str(BIN / "tssd"), "serve"]
    return Started(argv, env, home / "tssd.sock", env, home / "pools", tmp)


def shipped_unit(tmp: Path) -> Started:
    """(b): ExecStart= with the unit's Environment=, its paths below *tmp*/root."""
    root = tmp / "root"

    def moved(value: str) -> str:
        return str(root / value.lstrip("/")) if value.startswith("/") else value

    env = clean_env(tmp)
    argv: list[str] = []
    for key, value in unit_lines():
        if key == "Environment":
            name, _, setting = value.partition("=")
            env[name] = moved(setting)
        elif key == "ExecStart":
            argv = shlex.split(value)
        elif key in ("RuntimeDirectory", "StateDirectory", "ConfigurationDirectory"):
            base = {"RuntimeDirectory": "run", "StateDirectory": "var/lib",
                    "ConfigurationDirectory": "etc"}[key]  # fmt: skip
            (root / base / value).mkdir(parents=True)
    assert argv and Path(argv[0]).name == "tssd", argv
    # The unit's executable is the venv tssd is installed in: here, this one.
    argv = [str(BIN / "tssd"), *(moved(a) for a in argv[1:])]
    pool_roots = [Path(argv[i + 1]) for i, a in enumerate(argv) if a == "--pool-root"]
    for path in pool_roots:
        path.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "tssd.toml", env["TSSD_CONFIG"])
    # The shipped file names the production backend (sp); the simulated library stands in
    # for the tape library here, as the one environment variable a site would not set.
    env["TSSD_BACKEND_TYPE"] = "sim"
    sock = Path(env["TSSD_API_SOCKET"])
    # The tools run as an operator would: no TSSD_HOME; the socket's path moved with /run.
    shell = {k: v for k, v in env.items() if not k.startswith("TSSD_")} | {"TSSD_URL": str(sock)}
    started = Started(argv, env, sock, shell, pool_roots[0], tmp)
    started.moved_pool = True  # the unit's pool root, not $TSSD_HOME/pools
    return started


def run_script(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """bash -e on *script*; on a hang (a command waiting for a terminal), the whole
    process group is killed, not bash alone."""
    with subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += "\n(the walk-through hung and was killed after 120 s)"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(params=["embedded", "unit"])
def daemon(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Started]:
    start = embedded if request.param == "embedded" else shipped_unit
    started = start(tmp_path)
    try:
        yield started
    finally:
        if started.proc.poll() is None:
            stop_serve(started.proc, signal.SIGKILL)


def test_the_readme_walkthrough(daemon: Started) -> None:
    script = readme_walkthrough()
    tmp = daemon.tmp
    # Its scratch files in the test's directory; the pool where this daemon's root is.
    script = script.replace("/tmp/", f"{tmp}/")
    if daemon.moved_pool:
        pool = f"POOL={shlex.quote(str(daemon.pool))}"
        script = re.sub(r"^POOL=.*$", pool, script, flags=re.M)
    assert "tssctl top" in script and "tss-hsm remove" in script
    done = run_script(script, daemon.shell_env)
    log = daemon.log.read_text(errors="replace")[-4000:]
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{log}"
    out = done.stdout
    assert re.search(r"^osm://osm/\?store=atlas&group=tape&bfid=\S+$", out, re.M), out
    crc = (daemon.pool / "back.crcval").read_text().split()[0]
    assert re.search(rf"^{crc}$", out, re.M)
    assert (daemon.pool / "again").read_bytes() == (daemon.pool / "file").read_bytes()
    assert "1 recalls submitted" in out and "done 1/1 files" in done.stderr
    assert "tssd top" in out and "Drives" in out  # one frame, no terminal, and it ended
    assert (tmp / "efficiency.png").read_bytes()[:4] == b"\x89PNG"
    # Pointed at the metrics port by mistake, tssctl says which port it reached.
    metrics = f"http://127.0.0.1:{daemon.port}"
    wrong = subprocess.run(
        [str(BIN / "tssctl"), "--tssd", metrics, "status"],
        check=False, env=daemon.shell_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode != 0
    assert "metrics listener" in wrong.stderr and len(wrong.stderr.splitlines()) == 1
    assert stop_serve(daemon.proc) == 0

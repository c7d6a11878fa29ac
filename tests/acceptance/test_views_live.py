"""``tssctl top`` in a real terminal (tmux) and the ``/status`` page in a real browser
(headless Chromium), both against a real ``tssd serve`` during a recall campaign (issue 21).

tmux and Chromium are Debian packages (``tmux``, ``chromium``) that .ci/run installs;
without them these tests skip on a laptop and fail under CI=true. The Chromium
screenshot and the tmux captures are kept under ``$TSSD_ARTIFACTS`` when it is set, else
in the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon

from tssd.testing import BIN

pytestmark = pytest.mark.slow

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
QUEUES = ("atlas", "cms")
DRIVE_LINE = re.compile(
    r"^(drive\d+)\s+(\w+)\s+(\S+)\s+(\S+)\s+[#.\u2588\u2591]+\s+(\d+)%\s+(\S+)/"
)


def require(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        message = f"{tool} not installed (Debian package {package}; .ci/run installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: this test must run)", pytrace=False)
        pytest.skip(message)
    return found


def artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("TSSD_ARTIFACTS") or tmp_path / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def campaign(tmp_path: Path, volumes: int, per_volume: int) -> tuple[Path, list[Path]]:
    """A catalog of *volumes* tapes, and one file list per queue recalling every file."""
    out = tmp_path / "recalled"
    out.mkdir()
    rows, lists = [], {q: [] for q in QUEUES}
    for v in range(volumes):
        for seq in range(1, per_volume + 1):
            pnfsid = f"00{v:04X}{seq:06X}"
            size = 1_000_000 * (1 + seq % 4)
            rows.append(f"{pnfsid},PS{v:04d}L9,{seq},{size},atlas:tape,2025-01-01T00:00:00Z")
            lists[QUEUES[seq % len(QUEUES)]].append(f"{pnfsid} {out / pnfsid}")
    catalog = tmp_path / "catalog.csv"
    catalog.write_text(HEADER + "\n".join(rows) + "\n")
    paths = []
    for queue, lines in lists.items():
        paths.append(tmp_path / f"{queue}.txt")
        paths[-1].write_text("\n".join(lines) + "\n")
    return catalog, paths


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def running_campaign(tmp_path: Path, sqlite_url: str) -> Iterator[tuple[Daemon, int]]:
    """A daemon with three drives, its metrics listener on a free port, recalling four
    tapes of files in two queues (slow enough to watch: a few files a second per drive)."""
    port = free_port()
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    daemon.extra_env.update(
        TSSD_API_METRICS_TCP=f"127.0.0.1:{port}",
        TSSD_API_STATUS_SAMPLE_S="1",
        # The page is read again until no mount started meanwhile: each read renders anew.
        TSSD_API_STATUS_CACHE_S="0",
        TSSD_SIM_DRIVES="3",
        TSSD_SIM_TIME_SCALE="0.1",
        TSSD_SCHEDULER_KEEP_MOUNTED_S="0.5",
        TSSD_SCHEDULER_FILL_WAIT_S="0",
        # The campaign is still reading when the test ends: no need to let it finish.
        TSSD_SCHEDULER_SHUTDOWN_GRACE_S="1",
    )
    daemon.start()
    try:
        catalog, lists = campaign(tmp_path, volumes=4, per_volume=40)
        assert daemon.ctl("catalog", "import", str(catalog)).returncode == 0
        for queue, path in zip(QUEUES, lists, strict=True):
            cmd = [str(BIN / "tssctl"), "recall", "--file-list", str(path), "--queue", queue]
            assert subprocess.run(cmd, env=daemon.env, capture_output=True, timeout=60,
                                  check=False).returncode == 0  # fmt: skip
        yield daemon, port
    finally:
        assert daemon.stop() == 0


# -- tssctl top under tmux --------------------------------------------------------------


class Tmux:
    """A private tmux server (own socket): the user's tmux sessions are never touched."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary, self.socket = binary, home / "tmux.sock"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        self.env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color")

    def run(self, *args: str) -> str:
        cmd = [self.binary, "-u", "-f", "/dev/null", "-S", str(self.socket), *args]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=30,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def capture(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top")

    def kill(self) -> None:
        subprocess.run([self.binary, "-S", str(self.socket), "kill-server"], env=self.env,
                       capture_output=True, timeout=30, check=False)  # fmt: skip


def drive_lines(screen: str) -> dict[str, tuple[str, ...]]:
    return {m[1]: m.groups() for line in screen.splitlines() if (m := DRIVE_LINE.match(line))}


@pytest.mark.timeout(240)
def test_top_under_tmux_shows_drives_and_queues_and_quits_on_q(
    tmp_path: Path, running_campaign: tuple[Daemon, int]
) -> None:
    tmux = Tmux(require("tmux", "tmux"), tmp_path)
    daemon, _ = running_campaign
    exit_file = tmp_path / "top.exit"
    top = f"{shlex.quote(str(BIN / 'tssctl'))} --tssd {shlex.quote(str(daemon.socket))} top"
    shell = f"{top} --interval 1; echo $? > {shlex.quote(str(exit_file))}"
    keep = artifacts(tmp_path)
    try:
        tmux.run("new-session", "-d", "-s", "top", "-x", "100", "-y", "45", shell)
        drives = [d["name"] for d in daemon.client().call("GET", "/v1/drives")["drives"]]
        assert len(drives) == 3

        def every_drive_reading() -> str | None:
            screen = tmux.capture()
            lines = drive_lines(screen)
            busy = all(lines.get(d, ("",) * 3)[1] == "busy" for d in drives)
            return screen if busy else None

        first = wait_until(every_drive_reading, 90, "every drive reading on the screen")
        time.sleep(2.5)
        second = tmux.capture()
        (keep / "top-1.txt").write_text(first)
        (keep / "top-2.txt").write_text(second)
        for screen in (first, second):
            lines = screen.splitlines()
            assert max(len(line) for line in lines) <= 100
            for name in drives:
                assert any(line.startswith(name + " ") for line in lines), (name, screen)
            queues = [q["name"] for q in daemon.client().call("GET", "/v1/queues")["queues"]]
            for name in queues:
                assert any(line.startswith(name + " ") for line in lines), (name, screen)
            assert any("drives busy" in line for line in lines)
        # Progress moves: some drive read more files (or moved on to another tape).
        before, after = drive_lines(first), drive_lines(second)
        assert set(before) == set(after) == set(drives)
        assert any(before[d][2:] != after[d][2:] for d in drives), (first, second)
        tmux.run("send-keys", "-t", "top", "q")
        wait_until(exit_file.exists, 20, "tssctl top to exit")
        assert wait_until(lambda: exit_file.read_text().strip(), 5, "its exit code") == "0"
        # Ctrl-C leaves it as cleanly.
        exit_file.unlink()
        tmux.run("new-session", "-d", "-s", "top", "-x", "100", "-y", "45", shell)
        wait_until(lambda: "drives busy" in tmux.capture(), 30, "tssctl top to draw")
        tmux.run("send-keys", "-t", "top", "C-c")
        wait_until(exit_file.exists, 20, "tssctl top to exit on Ctrl-C")
        assert wait_until(lambda: exit_file.read_text().strip(), 5, "its exit code") == "0"
    finally:
        tmux.kill()


# -- /status in headless Chromium -------------------------------------------------------


class Chromium:
    def __init__(self, binary: str, home: Path, javascript: bool = True) -> None:
        self.binary, self.home = binary, home
        (home / "profile" / "Default").mkdir(parents=True, exist_ok=True)
        if not javascript:  # the profile's content setting: block JavaScript everywhere
            setting = {"profile": {"default_content_setting_values": {"javascript": 2}}}
            (home / "profile" / "Default" / "Preferences").write_text(json.dumps(setting))

    def run(self, url: str, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={self.home / 'profile'}", "--enable-logging=stderr", "--v=0",
            "--hide-scrollbars", *args, url,
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return done


def console_messages(stderr: str) -> list[str]:
    """What the page logged to the browser console (errors, failed loads, CSP reports)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def mount_ids(daemon: Daemon) -> list[int]:
    out = daemon.ctl("mounts", "--json", "--all")
    assert out.returncode == 0, out.stderr
    return [m["id"] for m in json.loads(out.stdout)["mounts"]]


@pytest.mark.timeout(240)
def test_status_page_in_headless_chromium(
    tmp_path: Path, running_campaign: tuple[Daemon, int]
) -> None:
    browser = Chromium(require("chromium", "chromium"), tmp_path / "chromium")
    daemon, port = running_campaign
    url = f"http://127.0.0.1:{port}/status"
    # During the campaign: some tapes done and dismounted, others still being read.
    wait_until(lambda: len(mount_ids(daemon)) >= 4, 120, "four mounts")
    for _ in range(10):  # a mount may start between the page and the history: read again
        before = mount_ids(daemon)
        shown = browser.run(url, "--dump-dom")
        if mount_ids(daemon) == before:
            break
    else:
        raise AssertionError("mounts kept starting while the page was read")
    dom = shown.stdout
    assert console_messages(shown.stderr) == []
    drawn = [int(i) for i in re.findall(r'<rect class="mount" data-mount-id="(\d+)"', dom)]
    assert sorted(drawn) == sorted(before)
    for figure in ("timeline", "depth", "wear"):
        assert f'<svg class="{figure}"' in dom, figure
    assert '<table class="drives">' in dom
    assert '<meta http-equiv="refresh" content="30">' in dom
    assert len(re.findall(r'<polyline class="depth"', dom)) >= 3  # queued, active, a queue
    # The screenshot, kept as an artifact.
    png = artifacts(tmp_path) / "status.png"
    shot = browser.run(url, f"--screenshot={png}", "--window-size=1000,1000")
    assert console_messages(shot.stderr) == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # Scripts off (a profile whose content setting blocks JavaScript, proved on a control
    # page): every figure is still there; the page has no script, its CSP forbids any.
    assert "<script" not in dom
    assert "content-security-policy" in {k.lower() for k in page_headers(url)}
    noscript = Chromium(browser.binary, tmp_path / "noscript", javascript=False)
    control = tmp_path / "control.html"
    control.write_text('<p id="x">off</p><script>document.getElementById("x").textContent="on"'
                       "</script>")  # fmt: skip
    assert '<p id="x">off</p>' in noscript.run(control.as_uri(), "--dump-dom").stdout
    bare = noscript.run(url, "--dump-dom")
    assert console_messages(bare.stderr) == []
    for figure in ("timeline", "depth", "wear"):
        assert f'<svg class="{figure}"' in bare.stdout, figure
    assert '<table class="drives">' in bare.stdout
    assert len(re.findall(r'<rect class="mount"', bare.stdout)) >= len(before)


def page_headers(url: str) -> dict[str, str]:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return dict(answer.headers)

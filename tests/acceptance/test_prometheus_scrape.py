"""A real Prometheus scrapes a real ``tssd serve`` during a short recall campaign; what it
stored for ``tssd_mounts_total`` and ``tssd_mount_efficiency`` must agree with tssd's own
mount history (``tssctl mounts --json``).

The Prometheus server is this test's own process (own port, own temporary storage); a
system Prometheus service, if the package started one, is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon

pytestmark = pytest.mark.slow

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
VOLUMES, FILES_PER_VOLUME = 4, 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def campaign(tmp_path: Path) -> tuple[Path, Path]:
    """A catalog of VOLUMES tapes and a file list recalling every file on them."""
    rows, lines = [], []
    out = tmp_path / "recalled"
    out.mkdir()
    for v in range(VOLUMES):
        for seq in range(1, FILES_PER_VOLUME + 1):
            pnfsid = f"00{v:04X}{seq:06X}"
            size = 200_000 * (1 + (v * FILES_PER_VOLUME + seq) % 5)
            rows.append(f"{pnfsid},PS{v:04d}L9,{seq},{size},atlas:tape,2025-01-01T00:00:00Z")
            lines.append(f"{pnfsid} {out / pnfsid}")
    catalog, file_list = tmp_path / "catalog.csv", tmp_path / "files.txt"
    catalog.write_text(HEADER + "\n".join(rows) + "\n")
    file_list.write_text("\n".join(lines) + "\n")
    return catalog, file_list


@pytest.fixture
def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = "prometheus not installed (Debian package prometheus; .ci/run installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: the real scrape test must run)", pytrace=False)
        pytest.skip(message)
    return found


class Prometheus:
    def __init__(self, binary: str, home: Path, target: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = home / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: tssd\n    scrape_interval: 1s\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = (home / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as answer:
            data = json.load(answer)
        assert data["status"] == "success", data
        result: list[dict[str, Any]] = data["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        try:
            result = self.query(expr)
        except OSError:
            return None  # not listening yet
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def prometheus_for(prometheus_binary: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Prometheus] = []

    def start(target: str) -> Prometheus:
        home = tmp_path / "prometheus"
        home.mkdir()
        started.append(Prometheus(prometheus_binary, home, target))
        return started[-1]

    yield start
    for p in started:
        p.stop()


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(180)
def test_prometheus_scrape_agrees_with_mount_history(
    tmp_path: Path, sqlite_url: str, prometheus_for: Any
) -> None:
    metrics_port = free_port()
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    daemon.extra_env.update(
        TSSD_API_METRICS_TCP=f"127.0.0.1:{metrics_port}",
        TSSD_SIM_TIME_SCALE="0.005",
        TSSD_SCHEDULER_KEEP_MOUNTED_S="0.5",
        # Mount at once, however little is queued (the scheduler's fill wait is off).
        TSSD_SCHEDULER_FILL_WAIT_S="0",
    )
    prometheus = prometheus_for(f"127.0.0.1:{metrics_port}")
    daemon.start()
    try:
        catalog, file_list = campaign(tmp_path)
        assert daemon.ctl("catalog", "import", str(catalog)).returncode == 0
        # Prometheus sees the daemon before any mount: the counter starts at 0.
        assert wait_until(lambda: prometheus.value("tssd_mounts_total") == 0, 60, "a scrape")
        res = daemon.ctl("recall", "--file-list", str(file_list), "--wait", "--interval", "0.2")
        assert res.returncode == 0, res.stderr

        def closed_history() -> list[dict[str, Any]] | None:
            out = daemon.ctl("mounts", "--json", "--all")
            mounts: list[dict[str, Any]] = json.loads(out.stdout)["mounts"]
            return mounts if mounts and not any(m["open"] for m in mounts) else None

        history = wait_until(closed_history, 60, "every tape dismounted")
        assert len(history) >= VOLUMES
        assert sum(m["files"] for m in history) == VOLUMES * FILES_PER_VOLUME

        def scraped_everything() -> bool:
            count = prometheus.value("tssd_mount_efficiency_count")
            return count == len(history) and prometheus.value("tssd_mounts_total") == len(history)

        wait_until(scraped_everything, 30, "Prometheus to scrape the final figures")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as answer:
            exposition = answer.read()
        efficiency_sum = prometheus.value("tssd_mount_efficiency_sum")
        files_sum = prometheus.value("tssd_mount_files_sum")
        bucket = prometheus.value('tssd_mount_efficiency_bucket{le="+Inf"}')
    finally:
        assert daemon.stop() == 0
    lint = subprocess.run(
        [str(Path(prometheus.binary).with_name("promtool")), "check", "metrics"],
        input=exposition, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert files_sum == VOLUMES * FILES_PER_VOLUME
    assert bucket == len(history)
    # The metric is observed with the daemon's monotonic clock, the history from database
    # timestamps taken a few milliseconds apart: equal within 3 %. (Small files and a
    # scaled clock make every efficiency small: the comparison is relative.)
    expected = sum(m["efficiency"] for m in history)
    assert efficiency_sum is not None and expected > 0
    assert efficiency_sum == pytest.approx(expected, rel=0.03)

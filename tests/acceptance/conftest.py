"""A real ``tssd serve`` subprocess per test, and helpers to run ``tss-hsm`` and ``tssctl``."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tssd.testing import BIN, ServeProcess, serve_env, spawn_serve, wait_ready
from tssd.wire import Client


@dataclass
class Result:
    args: Sequence[str]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Daemon(ServeProcess):
    home: Path
    db_url: str
    extra_env: dict[str, str] = field(default_factory=dict)
    #: Arguments after ``tssd serve`` (e.g. ``--pool-root DIR``).
    serve_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def env(self) -> dict[str, str]:
        settings = {
            "TSSD_SIM_TIME_SCALE": "0.0005",
            "TSSD_SIM_DRIVES": "2",
            "TSSD_SCHEDULER_TICK_S": "0.2",
            "TSSD_SCHEDULER_SHUTDOWN_GRACE_S": "10",
        }
        return serve_env(self.home, self.db_url, settings | self.extra_env)

    @property
    def socket(self) -> Path:
        return self.home / "tssd.sock"

    @property
    def log_path(self) -> Path:
        return self.home / f"tssd-{self.starts}.log"

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        self.proc = spawn_serve(self.env, self.log_path, args=self.serve_args)
        wait_ready(self.proc, self.socket, timeout, self.log)

    def client(self) -> Client:
        return Client(str(self.socket))

    def log(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-20000:] for p in sorted(self.home.glob("tssd-*.log"))
        )

    def events(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted(self.home.glob("tssd-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    found.append(json.loads(line))
        return found

    def run(
        self, tool: str, *args: str, timeout: float = 120.0, env: dict[str, str] | None = None
    ) -> Result:
        cmd = [str(BIN / tool), *args]
        proc = subprocess.run(
            cmd, env=env or self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        return Result(cmd, proc.returncode, proc.stdout, proc.stderr)

    def hsm(self, *args: str, **kw: Any) -> Result:
        return self.run("tss-hsm", *args, **kw)

    def ctl(self, *args: str, **kw: Any) -> Result:
        return self.run("tssctl", *args, **kw)

    def wait_for(self, predicate: Any, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"condition not met in {timeout} s\n{self.log()[-5000:]}")

    def mounts(self) -> list[dict[str, Any]]:
        """Every mount so far, in order, from the daemon's logs (mount.start events)."""
        return [e for e in self.events() if e.get("event") == "mount.start"]

    def requests(self, **filters: str) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        found: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.client().call("GET", f"/v1/requests?limit=1000&after={after}&{query}")
            found.extend(page["requests"])
            if page["next"] is None:
                return found
            after = page["next"]


@pytest.fixture
def daemon(tmp_path: Path, db_url: str) -> Iterator[Daemon]:
    d = Daemon(home=tmp_path / "home", db_url=db_url)
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop(signal.SIGKILL)


def storage_info(
    size: int, adler: str | None = None, store: str = "atlas", group: str = "tape"
) -> str:
    si = (
        f"size={size};new=true;stored=false;sClass={store}:{group};cClass=-;hsm=osm;"
        f"accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;"
    )
    if adler:
        si += f"flag-c=1:{adler};"
    return si + f"uid=1000;gid=1000;store={store};group={group};path=/pnfs/test/{size};"

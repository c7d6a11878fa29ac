"""Database faults: PostgreSQL is restarted under a running campaign; tssd keeps running,
reconnects and loses nothing.

The test runs its own throw-away cluster (initdb + pg_ctl on a free port), never the shared
server on 5432. Skipped when the PostgreSQL binaries are absent, except under CI=true.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(300)]

FILES = 16


class Cluster:
    """A private PostgreSQL cluster in a temporary directory."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="tssd-pgfault-"))
        self.data = self.root / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        # initdb refuses to run as root: the cluster then belongs to the postgres user.
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)  # fmt: skip

    def _ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                  "-m", "fast", "-o", options, action)  # fmt: skip

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres")
        self._ctl("start")

    def restart(self) -> None:
        self._ctl("restart")

    def stop(self) -> None:
        try:
            self._ctl("stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    bindir = Path(found[-1]).parent if found else None
    if bindir is None and shutil.which("initdb"):
        bindir = Path(shutil.which("initdb") or "").parent
    if bindir is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true: the PostgreSQL server binaries (initdb, pg_ctl) are needed")
        pytest.skip("PostgreSQL server binaries not installed")
    c = Cluster(bindir)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_postgres_restarts_lose_nothing(cluster: Cluster, tmp_path: Path) -> None:
    daemon = Daemon(home=tmp_path / "home", db_url=cluster.url)
    daemon.extra_env.update(TSSD_SIM_TIME_SCALE="0.01", TSSD_CLUSTER_ENABLED="false")
    daemon.start()
    pid = daemon.proc.pid if daemon.proc else 0
    pool, out = tmp_path / "pool", tmp_path / "out"
    pool.mkdir()
    out.mkdir()
    files = []
    for i in range(FILES):
        path = pool / f"f{i}"
        path.write_bytes(os.urandom(5000 + 7919 * i))
        files.append((f"00DB{i:032X}", path, adler32_file(path)))
    reissued = 0
    lock = threading.Lock()

    def until_ok(*args: str) -> str:
        # As dCache does: a call that failed (exit 1: tssd could not record it) is re-issued.
        nonlocal reissued
        for _ in range(30):
            res = daemon.hsm(*args)
            if res.returncode == 0:
                return res.stdout.strip()
            assert res.returncode == 1, res.stderr
            with lock:
                reissued += 1
            time.sleep(0.5)
        raise AssertionError(f"tss-hsm {args[0]} never succeeded: {res.stderr}")

    def one(f: tuple[str, Path, str]) -> None:
        si = f"-si={storage_info(f[1].stat().st_size, f[2])}"
        uri = until_ok("put", f[0], str(f[1]), si)
        until_ok("get", f[0], str(out / f[0]), si, f"-uri={uri}")

    restarts = 0

    def restarter() -> None:
        nonlocal restarts
        daemon.wait_for(lambda: any(r["state"] == "active" for r in daemon.requests()), 60)
        for _ in range(2):
            cluster.restart()
            restarts += 1
            time.sleep(1.0)

    killer = threading.Thread(target=restarter)
    killer.start()
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(one, files))
    killer.join()
    assert restarts == 2
    # The same daemon process served everything: it never stopped.
    assert daemon.alive() and daemon.proc is not None and daemon.proc.pid == pid
    assert daemon.starts == 1
    requests = daemon.requests()
    assert len(requests) == 2 * FILES
    assert {r["state"] for r in requests} == {"done"}
    for pnfsid, path, adler in files:
        assert (out / pnfsid).read_bytes() == path.read_bytes()
        assert adler32_file(out / pnfsid) == adler
    events = [e.get("event") for e in daemon.events()]
    assert "daemon.failed" not in events
    unavailable = events.count("api.database_unavailable")
    print(f"db faults: {restarts} restarts, {events.count('db.retry')} db.retry, "
          f"{unavailable} 503s, {reissued} re-issued calls")  # fmt: skip
    assert daemon.stop(signal.SIGTERM) == 0

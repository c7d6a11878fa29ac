"""Stages that dCache gives up on leave nothing at their path (issue 16, point 2).

The pool driver here follows dCache's own rules, read from its source (dCache/dcache):

- ``modules/dcache/src/main/java/org/dcache/pool/nearline/NearlineStorageHandler.java``:
  a stage's deadline is ``activatedAt + stageTimeout`` (``rh set timeout``); activation
  happens once per request, so exit-72 re-calls do not move it. A ``TimeoutTask`` runs
  every 30 s and cancels requests past their deadline; a failed or cancelled stage ends
  in ``done(cause)``, which removes the replica (``fileStore.remove(pnfsId)``). A later
  read of the file stages it again on the same pool.
- ``modules/dcache/src/main/java/org/dcache/pool/nearline/script/ScriptNearlineStorage.java``
  and ``modules/dcache-nearline-spi/.../AbstractBlockingNearlineStorage.java``: exit 72
  re-runs the script after ``p:delay`` (poll mode); a cancel interrupts the thread
  running the script.
- ``modules/dcache/src/main/java/diskCacheV111/util/RunSystem.java`` and
  ``HsmRunSystem.java``: an interrupted script gets ``Process.destroy()`` (SIGTERM) and,
  if still alive after a wait, ``destroyForcibly()`` (SIGKILL); 0 is success, 72 retry.

Real ``tss-hsm-fast`` processes against a real ``tssd serve``; the tape queue is paused
so that every stage outlives its deadline, then resumed: tssd reads the files, writes
part files no pool call claims, and removes them after ``delivery.claim_timeout_s``.
"""

from __future__ import annotations

import http.client
import random
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import BIN, Daemon

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FAST = "tss-hsm-fast"
CLAIM_TIMEOUT_S = 2.0


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def storage_info(size: int, adler: str, uri: str = "") -> str:
    si = (
        f"size={size};new=false;stored=true;sClass=atlas:tape;cClass=-;hsm=osm;"
        f"flag-c=1:{adler};store=atlas;group=tape;"
    )
    return si + (f"{uri};" if uri else "")


@dataclass
class Outcome:
    state: str  # "done", "cancelled" (deadline) or "failed"
    calls: int
    code: int | None = None


class PoolDriver:
    """One dCache pool staging files through ``tss-hsm-fast`` (see the module docstring).

    *check_s* is the TimeoutTask's period (30 s in dCache, scaled down here); *kill_after_s*
    the wait between SIGTERM and SIGKILL.
    """

    def __init__(
        self,
        daemon: Daemon,
        data: Path,
        mode: str,
        *,
        delay_s: float = 0.3,
        check_s: float = 0.25,
        kill_after_s: float = 1.0,
    ) -> None:
        self.daemon = daemon
        self.data = data
        self.mode = mode
        self.delay_s = delay_s
        self.check_s = check_s
        self.kill_after_s = kill_after_s

    def path(self, pid: str) -> Path:
        return self.data / pid

    def stage(self, pid: str, size: int, adler: str, uri: str, timeout_s: float) -> Outcome:
        activated = time.monotonic()  # once: exit-72 re-calls keep this deadline
        deadline = activated + timeout_s
        calls = 0
        args = [
            str(BIN / FAST), "get", pid, str(self.path(pid)),
            f"-si={storage_info(size, adler, uri)}", f"-uri={uri}",
            f"-tssd={self.daemon.socket}", f"-mode={self.mode}", "-queue=atlas",
        ]  # fmt: skip
        while True:
            calls += 1
            proc = subprocess.Popen(
                args, env=self.daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            code = self._wait(proc, deadline)
            if code is None:
                return self._cancelled(pid, calls)
            if code == 0:
                return Outcome("done", calls, 0)
            if code != 72:
                self.path(pid).unlink(missing_ok=True)
                return Outcome("failed", calls, code)
            # Re-called after p:delay, unless the TimeoutTask cancels first.
            pause_until = time.monotonic() + self.delay_s
            while time.monotonic() < pause_until:
                if time.monotonic() >= deadline:
                    return self._cancelled(pid, calls)
                time.sleep(self.check_s / 4)

    def _wait(self, proc: subprocess.Popen[bytes], deadline: float) -> int | None:
        """The script's exit code, or None when the deadline cancelled it (SIGTERM, SIGKILL)."""
        while True:
            try:
                code = proc.wait(timeout=self.check_s)
                proc.communicate()
                return code
            except subprocess.TimeoutExpired:
                if time.monotonic() < deadline:
                    continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.kill_after_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.communicate()
            return None

    def _cancelled(self, pid: str, calls: int) -> Outcome:
        # dCache's done(cause): the replica goes, whatever the script left.
        self.path(pid).unlink(missing_ok=True)
        return Outcome("cancelled", calls)


def metrics_text(sock: Path) -> str:
    conn = http.client.HTTPConnection("localhost", timeout=10)
    conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.sock.connect(str(sock))
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def put_files(daemon: Daemon, source: Path, count: int) -> list[tuple[str, int, str, str, bytes]]:
    source.mkdir(parents=True)
    files = []
    for i in range(1, count + 1):
        pid, size = pnfsid(i), 50_000 + i
        path = source / pid
        data = random.Random(i).randbytes(size)
        path.write_bytes(data)
        adler = adler32_file(path)
        si = storage_info(size, adler).replace("new=false;stored=true", "new=true;stored=false")
        res = daemon.run(FAST, "put", pid, str(path), f"-si={si}", f"-tssd={daemon.socket}")
        assert res.returncode == 0, res.stderr
        files.append((pid, size, adler, res.stdout.strip(), data))
    return files


@pytest.mark.parametrize("mode", ["poll", "block"])
def test_stages_past_their_deadline_leave_nothing_and_restage(
    daemon: Daemon, tmp_path: Path, mode: str
) -> None:
    daemon.extra_env["TSSD_DELIVERY_CLAIM_TIMEOUT_S"] = str(CLAIM_TIMEOUT_S)
    daemon.start()
    files = put_files(daemon, tmp_path / "source", 3)
    data = tmp_path / "pool" / "data"
    data.mkdir(parents=True)
    pool = PoolDriver(daemon, data, mode)

    # The tape queue holds every recall past its stage deadline (rh set timeout 2).
    assert daemon.ctl("queues", "set", "atlas", "--pause").returncode == 0
    outcomes: dict[str, Outcome] = {}

    def stage(pid: str, size: int, adler: str, uri: str) -> None:
        outcomes[pid] = pool.stage(pid, size, adler, uri, timeout_s=2.0)

    threads = [threading.Thread(target=stage, args=f[:4]) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {o.state for o in outcomes.values()} == {"cancelled"}, outcomes
    if mode == "poll":
        assert all(o.calls >= 2 for o in outcomes.values()), outcomes  # 72, then re-calls

    # tssd reads the files now; nothing may appear at the paths dCache gave up on.
    assert daemon.ctl("queues", "set", "atlas", "--resume").returncode == 0
    pids = {f[0] for f in files}

    def settled() -> bool:
        assert not any(pool.path(pid).exists() for pid in pids), list(data.iterdir())
        states = {r["pnfsid"]: r["state"] for r in daemon.requests(kind="recall")}
        return all(states.get(pid) == "abandoned" for pid in pids)

    daemon.wait_for(settled, timeout=120)
    assert list(data.iterdir()) == []  # no file, no .crcval, no orphan part file
    assert metric(metrics_text(daemon.socket), "tssd_recalls_abandoned_total") == 3
    listed = daemon.ctl("requests", "list", "--state", "abandoned", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(daemon.requests(state="abandoned")) == 3
    status = daemon.ctl("status", "--json")
    assert '"abandoned": 3' in status.stdout, status.stdout

    # dCache stages the files again later: a new recall each, delivered in full.
    for pid, size, adler, uri, content in files:
        outcome = pool.stage(pid, size, adler, uri, timeout_s=120.0)
        assert outcome.state == "done", outcome
        assert pool.path(pid).read_bytes() == content
        crc = data / f"{pid}.crcval"
        assert crc.read_text().split() == [adler]
    assert sorted(p.name for p in data.iterdir() if p.name.startswith(".")) == []
    recalls = daemon.requests(kind="recall")
    assert sorted(r["state"] for r in recalls) == ["abandoned"] * 3 + ["done"] * 3


def test_endit_file_left_in_in_without_a_request_is_removed_after_a_restart(
    daemon: Daemon, tmp_path: Path
) -> None:
    """ENDIT: tssd delivered ``in/<id>`` and stopped; the provider cancelled the stage
    (request file deleted, neicnordic/dcache-endit-provider's cancel) for good. The new
    daemon removes the file after ``endit.orphan_grace_s``; a file whose request file is
    there stays for the provider to take."""
    base = tmp_path / "endit"
    for sub in ("in", "out", "request", "trash"):
        (base / sub).mkdir(parents=True)
    config = tmp_path / "tssd.toml"
    config.write_text(
        f'[endit]\nrescan_s = 0.5\norphan_grace_s = 1.0\n[[endit.directories]]\npath = "{base}"\n'
        'hsm_name = "pool1"\n'
    )
    gone, kept = pnfsid(7), pnfsid(8)
    (base / "in" / gone).write_bytes(b"x" * 10)
    (base / "in" / kept).write_bytes(b"y" * 10)
    (base / "request" / kept).write_text('{"file_size": 10, "action": "recall"}')
    daemon.extra_env["TSSD_CONFIG"] = str(config)
    daemon.start()
    daemon.wait_for(lambda: not (base / "in" / gone).exists(), timeout=60)
    assert (base / "in" / kept).exists()

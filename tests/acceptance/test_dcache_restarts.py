"""A dCache pool in poll mode keeps working while tssd is killed and restarted.

The pool driver follows dCache's own rules, read in its source:

- ``modules/dcache/src/main/java/org/dcache/pool/nearline/script/ScriptNearlineStorage.java``:
  at most ``c:puts`` / ``c:gets`` scripts run at once (a ``BoundedExecutor``); every call is
  ``<command> put|get <pnfsid> <path> -si=... [-uri=...] <options>``; a request that asked
  to be called again is re-run after ``p:delay`` (``retry``).
- ``modules/dcache/src/main/java/diskCacheV111/util/HsmRunSystem.java``: exit 72 is an
  ``InProgressCacheException`` (call again), 0 is done, any other code ends the request.
- ``AbstractBlockingNearlineStorage.java`` (``modules/dcache-nearline-spi/src/main/java/
  org/dcache/pool/nearline/``) and ``NearlineStorageHandler.java`` (``modules/dcache/src/
  main/java/org/dcache/pool/nearline/``; ``getDeadline``, ``TimeoutTask``): a request is
  activated once, at its first run, and its deadline is activation plus ``rh set
  timeout`` / ``st set timeout`` across every re-call; a timer cancels expired requests
  every 30 s.
"""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import BIN, Daemon, Result
from test_dcache_hsm import FAST, a_file, dcache_si, get_args, options, pnfsid

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

FILES = 80
# c:puts / c:gets, and p:delay: 80 pending calls every 2 s keep a core busy (one
# interpreter start each); more would starve the restarting tssd of the shared CPU.
SLOTS = 4
P_DELAY_S = 2.0
TIMEOUT_S = 600.0  # rh / st set timeout: covers the whole run, restarts included


@dataclass
class PoolCall:
    """One flush or stage as the pool holds it."""

    key: str
    args: list[str]
    activated: float | None = None
    due: float = 0.0
    runs: int = 0
    result: Result | None = None


class PollPool:
    """The pool side: slots, activation once, p:delay between runs, deadline from activation."""

    def __init__(self, daemon: Daemon, *, slots: int = SLOTS, delay: float = P_DELAY_S) -> None:
        self.daemon = daemon
        self.slots = slots
        self.delay = delay
        self.unreachable_runs = 0
        self.lock = threading.Lock()

    def run(
        self, calls: list[PoolCall], on_done: Callable[[int], None] = lambda n: None
    ) -> dict[str, Result]:
        waiting = list(calls)
        finished: dict[str, Result] = {}
        running: dict[Future[Result], PoolCall] = {}
        with ThreadPoolExecutor(self.slots) as pool:
            while waiting or running:
                now = time.monotonic()
                for call in [c for c in waiting if c.due <= now][: self.slots - len(running)]:
                    waiting.remove(call)
                    if call.activated is None:
                        call.activated = now
                    assert now < call.activated + TIMEOUT_S, f"{call.key}: dCache cancels it"
                    call.runs += 1
                    running[pool.submit(self.daemon.run, FAST, *call.args)] = call
                if not running:
                    time.sleep(max(0.0, min(c.due for c in waiting) - now))
                    continue
                done, _ = wait(running, timeout=0.05, return_when=FIRST_COMPLETED)
                for future in done:
                    call = running.pop(future)
                    result = future.result()
                    if result.returncode == 72:
                        self._pending(result)
                        call.due = time.monotonic() + self.delay
                        waiting.append(call)
                        continue
                    finished[call.key] = result
                    on_done(len(finished))
        return finished

    def _pending(self, result: Result) -> None:
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        # Silent while tssd works on it; one line when tssd is away.
        assert len(lines) <= 1, result.stderr
        if lines:
            assert lines[0].startswith("tss-hsm: ") and "dCache calls again" in lines[0]
            with self.lock:
                self.unreachable_runs += 1


class Killer:
    """SIGKILLs tssd when the pool has finished given numbers of calls, and restarts it."""

    def __init__(self, daemon: Daemon, at: set[int], down_s: float = 1.0) -> None:
        self.daemon = daemon
        self.at = at
        self.down_s = down_s
        self.threads: list[threading.Thread] = []
        self.kills = 0

    def __call__(self, finished: int) -> None:
        if finished in self.at:
            self.at.discard(finished)
            thread = threading.Thread(target=self._restart)
            thread.start()
            self.threads.append(thread)

    def _restart(self) -> None:
        self.daemon.stop(signal.SIGKILL)
        self.kills += 1
        time.sleep(self.down_s)  # calls meanwhile find nobody there
        self.daemon.start(timeout=240)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)


def catalog_copies(daemon: Daemon) -> Counter[str]:
    """Copies per pnfsid in the simulated library's catalogue."""
    exported = daemon.client().call("GET", "/v1/catalog/export")
    rows = csv.DictReader(io.StringIO(exported["csv"]))
    return Counter(row["pnfsid"] for row in rows)


@pytest.mark.persistent
def test_80_puts_and_80_gets_ride_through_three_sigkills(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env.update(TSSD_SIM_TIME_SCALE="0.01")
    daemon.start()
    files = {pnfsid(i): a_file(tmp_path / "pool", i, 1000 + 997 * i)[1:] for i in range(FILES)}
    pool = PollPool(daemon)
    poll = options(daemon, "-mode=poll")

    killer = Killer(daemon, {FILES // 3})
    puts = [
        PoolCall(
            pid, ["put", pid, str(path), f"-si={dcache_si(path.stat().st_size, adler)}", *poll]
        )
        for pid, (path, adler) in files.items()
    ]
    put_results = pool.run(puts, killer)
    killer.join()
    uris = {}
    for pid, res in put_results.items():
        assert res.returncode == 0, res.stderr
        [uris[pid]] = res.stdout.splitlines()

    restore = tmp_path / "restore"
    restore.mkdir()
    killer = Killer(daemon, {FILES // 5, FILES * 2 // 3})
    gets = [
        PoolCall(pid, [*get_args(pid, restore / pid, path.stat().st_size, adler, uris[pid]), *poll])
        for pid, (path, adler) in files.items()
    ]
    get_results = pool.run(gets, killer)
    killer.join()

    assert killer.kills == 2 and daemon.starts == 4
    assert all(res.returncode == 0 for res in get_results.values()), [
        r.stderr for r in get_results.values() if r.returncode
    ]
    assert pool.unreachable_runs > 0  # the calls did meet an absent tssd
    for pid, (path, adler) in files.items():
        dest = restore / pid
        assert adler32_file(dest) == adler
        assert dest.read_bytes() == path.read_bytes()
        assert (restore / f"{pid}.crcval").read_text() == adler + "\n"
    # No duplicate tape copy: one copy and one migration per file.
    assert catalog_copies(daemon) == Counter(dict.fromkeys(files, 1))
    migrations = daemon.requests(kind="migrate")
    assert sorted(r["pnfsid"] for r in migrations) == sorted(files)
    assert {r["state"] for r in migrations} == {"done"}


def test_reissued_puts_answer_at_once(daemon: Daemon, tmp_path: Path) -> None:
    """dCache re-issues a put whose answer it lost (``NearlineStorageHandler``: a pool
    restart while notifying the namespace flushes the file again)."""
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 7, 54_321)
    args = ["put", pid, str(path), f"-si={dcache_si(path.stat().st_size, adler)}",
            *options(daemon, "-mode=poll")]  # fmt: skip
    first = PollPool(daemon).run([PoolCall(pid, args)])[pid]
    assert first.returncode == 0, first.stderr
    for _ in range(5):
        again = daemon.run(FAST, *args)
        assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, "")
    [migration] = daemon.requests(kind="migrate")
    assert migration["state"] == "done"
    # A different file under the same pnfsid (other checksum) is a new migration.
    path.write_bytes(b"other bytes")
    other = ["put", pid, str(path), f"-si={dcache_si(11, adler32_file(path))}",
             *options(daemon, "-mode=poll")]  # fmt: skip
    assert daemon.run(FAST, *other).returncode == 72
    assert len(daemon.requests(kind="migrate")) == 2


def test_reissued_put_after_its_copy_was_removed_writes_again(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 8, 4321)
    args = ["put", pid, str(path), f"-si={dcache_si(4321, adler)}", *options(daemon)]
    first = daemon.run(FAST, *args)
    assert first.returncode == 0, first.stderr
    assert (
        daemon.run(FAST, "remove", f"-uri={first.stdout.strip()}", *options(daemon)).returncode == 0
    )
    again = daemon.run(FAST, *args)
    assert again.returncode == 0, again.stderr
    assert again.stdout != first.stdout
    assert len(daemon.requests(kind="migrate")) == 2


@pytest.mark.persistent
def test_block_mode_get_issued_while_tssd_restarts_three_times(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Block mode: a call that finds tssd down waits for it, and a waiting call reconnects."""
    daemon.extra_env.update(TSSD_SIM_TIME_SCALE="0.05")
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 9, 200_003)
    put = daemon.run(FAST, "put", pid, str(path), f"-si={dcache_si(200_003, adler)}",
                     *options(daemon))  # fmt: skip
    assert put.returncode == 0, put.stderr
    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    args = [*get_args(pid, dest, 200_003, adler, put.stdout.strip()), *options(daemon)]
    daemon.stop(signal.SIGKILL)
    proc = subprocess.Popen([str(BIN / FAST), *args], env=daemon.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(3):
            time.sleep(0.7)  # the call finds nobody there
            daemon.start(timeout=240)
            daemon.wait_for(lambda: len(daemon.requests(kind="recall")) == 1)
            daemon.stop(signal.SIGKILL)
        daemon.start(timeout=240)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert (proc.returncode, stdout) == (0, ""), stderr
    assert all(line.startswith("tss-hsm: ") for line in stderr.splitlines())
    assert "lost tssd" in stderr and "reconnected" in stderr
    assert dest.read_bytes() == path.read_bytes()
    [recall] = daemon.requests(kind="recall")
    assert recall["state"] == "done"

"""tss-hsm as dCache runs it, against a real ``tssd serve``: argument lists, poll mode,
daemon restarts and dCache's SIGTERM timeout. Every call is a real process, and the
launcher is the one docs/dcache.md puts in ``-command=`` (``tss-hsm-fast``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN, Daemon, Result

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FAST = "tss-hsm-fast"
# What `hsm create osm osm script -command=... -c:gets=200 -p:delay=1 <these>` hands over:
# dCache drops command, c:* and p:*, passes the rest as -key=value, and bare -key if empty.
POOL_OPTIONS = ("-tssd={socket}", "-queue=atlas", "-hsmInstance=osm", "-debug", "-hsmBase=/hsm")


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def dcache_si(size: int, adler: str, uris: tuple[str, ...] = (), *, stored: bool = False) -> str:
    """A storage info string in the order dCache's OSMStorageInfo builds it."""
    si = (
        f"size={size};new={str(not stored).lower()};stored={str(stored).lower()};"
        "sClass=atlas:tape;cClass=-;hsm=osm;accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;"
        f"path=/pnfs/example.org/data/atlas/run=7/f{size};uid=31415;gid=2718;"
        f"flag-c=1:{adler};store=atlas;group=tape;"
    )
    return si + "".join(f"{uri};" for uri in uris)


def options(daemon: Daemon, *extra: str) -> list[str]:
    return [o.format(socket=daemon.socket) for o in POOL_OPTIONS] + list(extra)


def a_file(directory: Path, i: int, size: int) -> tuple[str, Path, str]:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / pnfsid(i)
    path.write_bytes(random.Random(i).randbytes(size))
    return pnfsid(i), path, adler32_file(path)


def put(daemon: Daemon, pid: str, path: Path, adler: str, *extra: str) -> str:
    size = path.stat().st_size
    res = daemon.run(FAST, "put", pid, str(path), f"-si={dcache_si(size, adler)}", *extra)
    assert res.returncode == 0, res.stderr
    [uri] = res.stdout.splitlines()
    assert uri.startswith("osm://osm/?store=atlas&group=tape&bfid=")
    return uri


def get_args(pid: str, dest: Path, size: int, adler: str, uri: str) -> list[str]:
    # dCache passes every location of its own HSM instance as -uri= (here a second copy
    # tssd does not know first), and lists them, and those of other instances, as bare
    # entries in the storage info too.
    copy = "osm://osm/?store=atlas&group=tape&bfid=c0ffee"
    other = "osm://other/?store=atlas&group=tape&bfid=feedface"
    si = dcache_si(size, adler, (copy, uri, other), stored=True)
    return ["get", pid, str(dest), f"-si={si}", f"-uri={copy}", f"-uri={uri}"]


def poll(daemon: Daemon, args: list[str], deadline_s: float = 120) -> tuple[Result, int]:
    """Call like a pool in poll mode (p:delay 0.2 s) until the call stops answering 72."""
    deadline = time.monotonic() + deadline_s
    pending = 0
    while time.monotonic() < deadline:
        res = daemon.run(FAST, *args)
        if res.returncode != 72:
            return res, pending
        assert (res.stdout, res.stderr) == ("", "")
        pending += 1
        time.sleep(0.2)
    raise AssertionError(f"still 72 after {deadline_s} s")


def test_dcache_argument_lists_block_mode(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 1, 123_457)
    uri = put(daemon, pid, path, adler, *options(daemon))
    # Put again (dCache lost the reply): the existing URI, no second copy.
    assert put(daemon, pid, path, adler, *options(daemon)) == uri

    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    args = get_args(pid, dest, path.stat().st_size, adler, uri)
    res = daemon.run(FAST, *args, *options(daemon))
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert dest.read_bytes() == path.read_bytes()
    assert dest.with_name(pid + ".crcval").read_text().splitlines()[0] == adler

    # The console script of the contract takes the same list.
    dest.unlink()
    res = daemon.hsm(*args, *options(daemon))
    assert res.returncode == 0, res.stderr
    assert dest.read_bytes() == path.read_bytes()

    # remove: no pnfsid, one -uri= per copy, the pool options after it.
    res = daemon.run(FAST, "remove", f"-uri={uri}", *options(daemon))
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    dest.unlink()
    res = daemon.run(FAST, *args, *options(daemon))
    assert res.returncode == 31, res.stderr
    assert len(res.stderr.splitlines()) == 1
    assert not dest.exists()


def test_poll_mode_put_get_with_real_daemon(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env["TSSD_SIM_TIME_SCALE"] = "0.02"  # a mount takes about 1 s: several polls
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 2, 2_000_003)
    size = path.stat().st_size
    res, _ = poll(daemon, ["put", pid, str(path), f"-si={dcache_si(size, adler)}",
                           *options(daemon, "-mode=poll")])  # fmt: skip
    assert res.returncode == 0, res.stderr
    [uri] = res.stdout.splitlines()

    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    args = [*get_args(pid, dest, size, adler, uri), *options(daemon, "-mode=poll")]
    res, pending = poll(daemon, args)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert pending >= 1
    assert dest.read_bytes() == path.read_bytes()
    assert dest.with_name(pid + ".crcval").read_text() == adler + "\n"
    # Many polls, one recall: every poll found the request the first call submitted.
    [recall] = daemon.requests(kind="recall")
    assert recall["state"] == "done"

    # The next stage of the same file (evicted meanwhile) is a new recall, not the old one.
    dest.unlink()
    dest.with_name(pid + ".crcval").unlink()
    res, _ = poll(daemon, args)
    assert res.returncode == 0, res.stderr
    assert dest.read_bytes() == path.read_bytes()
    assert [r["state"] for r in daemon.requests(kind="recall")] == ["done", "done"]


def test_poll_mode_reports_a_failure_once(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 3, 1000)
    uri = put(daemon, pid, path, adler, *options(daemon))
    assert daemon.run(FAST, "remove", f"-uri={uri}", *options(daemon)).returncode == 0
    dest = tmp_path / pid
    args = [*get_args(pid, dest, 1000, adler, uri), *options(daemon, "-mode=poll")]
    res, _ = poll(daemon, args)
    assert res.returncode == 31, res.stderr
    # dCache's retry of the stage is a new recall (which fails again), not the old answer.
    assert daemon.run(FAST, *args).returncode in (31, 72)
    assert len(daemon.requests(kind="recall")) == 2


def start_get(daemon: Daemon, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / FAST), *args],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def slow_recall_setup(daemon: Daemon, tmp_path: Path) -> tuple[list[str], Path, Path]:
    """A file on tape, and the get of it while a mount takes several seconds."""
    daemon.extra_env.update(TSSD_SIM_TIME_SCALE="0.1", TSSD_SCHEDULER_SHUTDOWN_GRACE_S="0.5")
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 4, 300_001)
    uri = put(daemon, pid, path, adler, *options(daemon))
    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    return [*get_args(pid, dest, path.stat().st_size, adler, uri), *options(daemon)], path, dest


@pytest.mark.persistent
def test_blocking_get_survives_a_tssd_restart(daemon: Daemon, tmp_path: Path) -> None:
    args, path, dest = slow_recall_setup(daemon, tmp_path)
    proc = start_get(daemon, args)
    try:
        daemon.wait_for(lambda: len(daemon.requests(kind="recall", state="active")) == 1)
        assert daemon.stop(signal.SIGTERM) == 0
        time.sleep(0.5)  # the waiting tss-hsm finds nobody there
        daemon.start()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, stdout) == (0, ""), stderr
    assert "lost tssd" in stderr and "reconnected" in stderr
    assert all(line.startswith("tss-hsm: ") for line in stderr.splitlines())
    assert dest.read_bytes() == path.read_bytes()
    [recall] = daemon.requests(kind="recall")
    assert recall["state"] == "done"


def test_sigterm_exits_143_and_the_reissued_get_attaches(daemon: Daemon, tmp_path: Path) -> None:
    args, path, dest = slow_recall_setup(daemon, tmp_path)
    proc = start_get(daemon, args)
    try:
        daemon.wait_for(lambda: len(daemon.requests(kind="recall")) == 1)
        time.sleep(0.3)  # into the long-poll wait
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, stdout) == (143, "")
    assert "SIGTERM" in stderr and len(stderr.splitlines()) == 1
    [open_request] = daemon.requests(kind="recall")
    assert open_request["state"] in ("queued", "active")
    assert not dest.exists()

    res = daemon.run(FAST, *args)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert dest.read_bytes() == path.read_bytes()
    [recall] = daemon.requests(kind="recall")
    assert (recall["id"], recall["state"]) == (open_request["id"], "done")


def test_fast_launcher_is_installed_next_to_the_console_script() -> None:
    launcher = BIN / FAST
    assert os.access(launcher, os.X_OK)
    res = subprocess.run([str(launcher), "--help"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.startswith("usage: tss-hsm")

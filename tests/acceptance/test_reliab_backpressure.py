"""Disk backpressure with the real daemon and a real, small file system (tmpfs).

Recalls into a nearly full pool file system wait (queued, 'disk_full' in tssctl why)
instead of failing, and complete once space returns. Needs root to mount the tmpfs;
the logic itself is covered without one in tests/unit/test_reliab_guards.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BIN, Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

MiB = 1024 * 1024


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "pooldisk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_recalls_wait_for_disk_space_and_resume(
    small_fs: Path, tmp_path: Path, sqlite_url: str
) -> None:
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    daemon.extra_env.update(
        TSSD_BACKPRESSURE_MIN_FREE_BYTES=str(1 * MiB),
        TSSD_BACKPRESSURE_MIN_FREE_PERCENT="0",
        TSSD_BACKPRESSURE_RECHECK_S="0.2",
    )
    daemon.start()
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for i in range(3):
        path = src / f"f{i}"
        path.write_bytes(os.urandom(200_000 + i))
        pid = f"00BB{i:032X}"
        si = f"-si={storage_info(path.stat().st_size, adler32_file(path))}"
        res = daemon.hsm("put", pid, str(path), si)
        assert res.returncode == 0, res.stderr
        files.append((pid, path, si, res.stdout.strip()))
    ballast = small_fs / "ballast"
    ballast.write_bytes(b"\0" * int(3.3 * MiB))  # leaves ~0.7 MiB: below the 1 MiB floor
    gets = [
        subprocess.Popen(
            [str(BIN / "tss-hsm"), "get", pid, str(small_fs / pid), si, f"-uri={uri}"],
            env=daemon.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid, _path, si, uri in files
    ]
    try:
        daemon.wait_for(
            lambda: any(e.get("event") == "backpressure.hold" for e in daemon.events()), 60
        )
        recalls = daemon.requests(kind="recall")
        assert recalls and all(r["state"] in ("queued", "active") for r in recalls)
        held = next(r for r in recalls if r["state"] == "queued")
        why = daemon.client().call("GET", f"/v1/requests/{held['id']}/why")
        assert why["rule"] == "disk_full", why
        text = daemon.ctl("why", str(held["id"]))
        assert text.returncode == 0 and "full" in text.stdout, text.stdout + text.stderr
        assert all(p.poll() is None for p in gets)  # tss-hsm waits; nothing failed
        ballast.unlink()  # space returns
        codes = [p.wait(timeout=120) for p in gets]
    finally:
        for p in gets:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert codes == [0, 0, 0]
    for pid, path, _si, _uri in files:
        assert (small_fs / pid).read_bytes() == path.read_bytes()
    assert daemon.requests(state="failed") == []
    assert any(e.get("event") == "backpressure.release" for e in daemon.events())
    assert daemon.stop(signal.SIGTERM) == 0

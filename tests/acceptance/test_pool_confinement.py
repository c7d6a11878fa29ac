"""Pool paths are confined where tssd opens them (issue 17, points 1-3), with a real
``tssd serve`` and real ``tss-hsm`` processes: a symlink planted at the part file's name,
a destination directory or a source swapped for a symlink after submit, FIFO and device
sources, and the default confinement to ``$TSSD_HOME/pools`` plus ``--pool-root``.
docs/reliability.md lists each attack with its expected and observed result.
"""

from __future__ import annotations

import os
import random
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon

from tssd.testing import adler32_file
from tssd.wire import ApiError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FAST = "tss-hsm-fast"
SECRET = b"the daemon's user can read this; no pool client may\n"


def si(size: int, adler: str | None = None, *, stored: bool = False) -> str:
    state = "new=false;stored=true" if stored else "new=true;stored=false"
    flag = f"flag-c=1:{adler};" if adler else ""
    return f"size={size};{state};sClass=atlas:tape;cClass=-;hsm=osm;{flag}store=atlas;group=tape;"


def confined(daemon: Daemon, tmp_path: Path) -> tuple[Path, Path]:
    """Pool root tmp/pool (its data/ made), and a directory outside it holding a secret."""
    pool, outside = tmp_path / "pool", tmp_path / "outside"
    (pool / "data").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(SECRET)
    daemon.extra_env["TSSD_API_POOL_ROOTS"] = str(pool)
    return pool, outside


def a_file(directory: Path, i: int, size: int) -> tuple[str, Path, str]:
    pid = f"0000{i:032X}"
    path = directory / pid
    path.write_bytes(random.Random(i).randbytes(size))
    return pid, path, adler32_file(path)


def put(daemon: Daemon, pid: str, path: Path, adler: str, *extra: str) -> Any:
    return daemon.run(FAST, "put", pid, str(path), f"-si={si(path.stat().st_size, adler)}",
                      f"-tssd={daemon.socket}", *extra)  # fmt: skip


def dev_zero(pid: str) -> dict[str, Any]:
    return {"kind": "migrate", "pnfsid": pid, "path": "/dev/zero", "size": 10,
            "storage_class": "atlas:tape"}  # fmt: skip


def newest(daemon: Daemon, kind: str, pid: str) -> dict[str, Any]:
    found = [r for r in daemon.requests(kind=kind) if r["pnfsid"] == pid]
    return max(found, key=lambda r: r["id"])


def finished(daemon: Daemon, kind: str, pid: str) -> dict[str, Any]:
    result: dict[str, Any] = {}

    def done() -> bool:
        result.update(newest(daemon, kind, pid))
        return result["state"] in ("done", "failed", "cancelled", "abandoned")

    daemon.wait_for(done, timeout=120)
    return result


def test_symlink_planted_at_the_part_file_is_not_followed(daemon: Daemon, tmp_path: Path) -> None:
    pool, outside = confined(daemon, tmp_path)
    daemon.start()
    pid, path, adler = a_file(pool / "data", 1, 70_001)
    res = put(daemon, pid, path, adler)
    assert res.returncode == 0, res.stderr
    uri = res.stdout.strip()
    content = path.read_bytes()
    path.unlink()
    # The attacker's link where tssd writes the recall before it is claimed.
    part = pool / "data" / f".{pid}.tssd-part"
    part.symlink_to(outside / "secret")
    res = daemon.run(FAST, "get", pid, str(path), f"-si={si(len(content), adler, stored=True)}",
                     f"-uri={uri}", f"-tssd={daemon.socket}")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (outside / "secret").read_bytes() == SECRET
    assert path.read_bytes() == content and not path.is_symlink()
    assert not os.path.lexists(part)


def test_destination_swapped_for_a_symlink_after_submit(daemon: Daemon, tmp_path: Path) -> None:
    pool, outside = confined(daemon, tmp_path)
    daemon.start()
    pid, path, adler = a_file(pool / "data", 2, 60_002)
    uri = put(daemon, pid, path, adler).stdout.strip()
    size = path.stat().st_size
    path.unlink()
    assert daemon.ctl("queues", "set", "default", "--pause").returncode == 0
    args = ["get", pid, str(path), f"-si={si(size, adler, stored=True)}", f"-uri={uri}",
            f"-tssd={daemon.socket}", "-mode=poll"]  # fmt: skip
    assert daemon.run(FAST, *args).returncode == 72
    # Submitted and checked; now the destination directory leads out of the root.
    (pool / "data").rename(pool / "data-away")
    (pool / "data").symlink_to(outside, target_is_directory=True)
    assert daemon.ctl("queues", "set", "default", "--resume").returncode == 0
    request = finished(daemon, "recall", pid)
    assert request["state"] == "failed", request
    assert "symlink" in request["error"], request
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    # The next poll: its path now resolves outside the root, refused before anything else
    # (1: a setup fault to fix on tssd's side, which dCache retries).
    res = daemon.run(FAST, *args)
    assert res.returncode == 1, res.stderr
    assert "--pool-root" in res.stderr


def test_source_swapped_for_a_symlink_after_submit(daemon: Daemon, tmp_path: Path) -> None:
    pool, outside = confined(daemon, tmp_path)
    daemon.extra_env["TSSD_SCHEDULER_MIGRATE_MAX_AGE_S"] = "2"
    daemon.start()
    pid, path, adler = a_file(pool / "data", 3, len(SECRET))
    res = put(daemon, pid, path, adler, "-mode=poll")
    assert res.returncode == 72, res.stderr
    # Same size, so only the open itself can tell.
    path.unlink()
    path.symlink_to(outside / "secret")
    request = finished(daemon, "migrate", pid)
    assert request["state"] == "failed", request
    assert "symlink" in request["error"], request
    assert request["error_code"] == 42


def test_fifo_and_device_sources_fail_at_once(daemon: Daemon, tmp_path: Path) -> None:
    pool, _ = confined(daemon, tmp_path)
    daemon.start()
    fifo = pool / "data" / "0000F1F0"
    os.mkfifo(fifo)
    sources = [fifo]
    device = pool / "data" / "0000DE7"
    try:
        os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # what /dev/zero is
        sources.append(device)
    except PermissionError:
        pass  # no CAP_MKNOD here: the FIFO and /dev/zero below still run
    for source in sources:
        started = time.monotonic()
        res = daemon.run(FAST, "put", source.name, str(source), f"-si={si(10)}",
                         f"-tssd={daemon.socket}", timeout=30)  # fmt: skip
        assert res.returncode == 42, res.stderr
        assert "not a regular file" in res.stderr
        assert time.monotonic() - started < 10
        # The daemon refuses it too when a client submits it directly.
        client = daemon.client()
        client.call("POST", "/v1/requests", {"kind": "migrate", "pnfsid": source.name,
                    "path": str(source), "size": 10, "storage_class": "atlas:tape"})  # fmt: skip
        request = finished(daemon, "migrate", source.name.upper())
        assert request["state"] == "failed", request
        assert "not a regular file" in request["error"], request
    # /dev/zero itself lies outside the pool root: refused when submitted.
    with pytest.raises(ApiError) as refused:
        daemon.client().call("POST", "/v1/requests", dev_zero("0000D0"))
    assert refused.value.status == 400
    # No drive is held by any of them: a real file still migrates.
    pid, path, adler = a_file(pool / "data", 4, 40_004)
    res = put(daemon, pid, path, adler)
    assert res.returncode == 0, res.stderr


def test_dev_zero_with_the_confinement_lifted_fails(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env["TSSD_API_POOL_ROOTS"] = "/"  # an operator's explicit choice
    daemon.start()
    daemon.client().call("POST", "/v1/requests", dev_zero("0000D1"))
    request = finished(daemon, "migrate", "0000D1")
    assert request["state"] == "failed" and "character device" in request["error"], request


def test_default_roots_are_home_pools_and_the_command_line(daemon: Daemon, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    daemon.extra_env["TSSD_API_POOL_ROOTS"] = ""  # nothing configured: the default
    daemon.serve_args = ["--pool-root", str(extra)]
    daemon.start()
    pools = daemon.home / "pools"
    assert pools.is_dir()  # created at start
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for i, directory in enumerate((pools, extra, outside), start=10):
        pid, path, adler = a_file(directory, i, 30_000 + i)
        res = put(daemon, pid, path, adler)
        if directory is outside:  # an installation fault: 1, which dCache retries
            assert res.returncode == 1, res.stderr
            assert "--pool-root" in res.stderr
        else:
            assert res.returncode == 0, res.stderr
    size = os.path.getsize("/etc/passwd")
    res = daemon.run(FAST, "put", "0000E7C", "/etc/passwd", f"-si={si(size)}",
                     f"-tssd={daemon.socket}")  # fmt: skip
    assert res.returncode == 1, res.stderr


def linked_root(daemon: Daemon, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The pool root a symlink (tmp/pool -> tmp/real, as ``/pool`` -> ``/srv/pool1``);
    tmp/outside has a data/ of its own, so a path still resolves once the link is turned."""
    real, link, outside = tmp_path / "real", tmp_path / "pool", tmp_path / "outside"
    (real / "data").mkdir(parents=True)
    (outside / "data").mkdir(parents=True)
    link.symlink_to(real, target_is_directory=True)
    daemon.extra_env["TSSD_API_POOL_ROOTS"] = str(link)
    return real, link, outside


def retarget(link: Path, target: Path) -> None:
    turned = link.with_name(link.name + ".new")
    turned.symlink_to(target, target_is_directory=True)
    turned.replace(link)  # rename(2): the link changes target at once


def test_a_root_that_is_a_symlink_is_followed_once_at_start(daemon: Daemon, tmp_path: Path) -> None:
    real, link, outside = linked_root(daemon, tmp_path)
    daemon.start()
    [resolved] = [e for e in daemon.events() if e.get("event") == "pool.root_resolved"]
    assert resolved["root"] == str(link) and resolved["resolved"] == str(real), resolved
    pid, path, adler = a_file(link / "data", 5, 50_005)
    content = path.read_bytes()
    uri = put(daemon, pid, path, adler).stdout.strip()
    (real / "data" / pid).unlink()
    # A recall submitted while the root leads to the pool; the link turned before it runs.
    assert daemon.ctl("queues", "set", "default", "--pause").returncode == 0
    res = daemon.run(FAST, "get", pid, str(path), f"-si={si(len(content), adler, stored=True)}",
                     f"-uri={uri}", f"-tssd={daemon.socket}", "-mode=poll")  # fmt: skip
    assert res.returncode == 72, res.stderr
    retarget(link, outside)
    assert daemon.ctl("queues", "set", "default", "--resume").returncode == 0
    request = finished(daemon, "recall", pid)
    assert request["state"] == "done", request
    # Written where the root led at start, nothing where it leads now.
    assert (real / "data" / f".{pid}.tssd-part").read_bytes() == content
    assert sorted(p.name for p in outside.rglob("*")) == ["data"]


def test_a_migration_reads_below_the_root_as_resolved_at_start(
    daemon: Daemon, tmp_path: Path
) -> None:
    _, link, outside = linked_root(daemon, tmp_path)
    daemon.start()
    pid, path, adler = a_file(link / "data", 6, len(SECRET))
    assert daemon.ctl("queues", "set", "default", "--pause").returncode == 0
    res = put(daemon, pid, path, adler, "-mode=poll")
    assert res.returncode == 72, res.stderr
    # The same name and size where the turned link leads: only the open can tell.
    (outside / "data" / pid).write_bytes(SECRET)
    retarget(link, outside)
    assert daemon.ctl("queues", "set", "default", "--resume").returncode == 0
    request = finished(daemon, "migrate", pid)
    assert request["state"] == "done", request
    assert request["adler32"] == adler, request

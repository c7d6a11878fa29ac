"""One pnfsid, two pools, with a real ``tssd serve`` and real ``tss-hsm`` processes.

dCache names a file by its pnfsid, but two pools can hold different bytes under one (a
replica rewritten, a pool restored from an old disk). A put from pool B must not attach
to pool A's open migration of other bytes (B's would never reach tape), and a get from
pool B that attached to pool A's recall must leave its outcome to A. The pool side is
dCache's ``modules/dcache/src/main/java/org/dcache/pool/nearline/script/
ScriptNearlineStorage.java`` (one script call per file, retried on a non-zero exit).
docs/reliability.md lists the attacks with their expected and observed results.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from conftest import Daemon
from test_dcache_hsm import FAST, dcache_si, get_args, options, pnfsid, poll, put, start_get
from test_faults_backend import metrics

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def pool_file(directory: Path, pid: str, seed: int, size: int) -> tuple[Path, str]:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / pid
    path.write_bytes(random.Random(seed).randbytes(size))
    return path, adler32_file(path)


def put_args(daemon: Daemon, pid: str, path: Path, adler: str, *extra: str) -> list[str]:
    size = path.stat().st_size
    return ["put", pid, str(path), f"-si={dcache_si(size, adler)}", *options(daemon, *extra)]


def test_a_put_of_other_bytes_does_not_attach_to_the_open_migration(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.start()
    pid = pnfsid(50)
    path_a, adler_a = pool_file(tmp_path / "poolA", pid, 1, 30_000)
    path_b, adler_b = pool_file(tmp_path / "poolB", pid, 2, 31_000)
    assert daemon.ctl("queues", "set", "atlas", "--pause").returncode == 0
    res = daemon.run(FAST, *put_args(daemon, pid, path_a, adler_a, "-mode=poll"))
    assert res.returncode == 72, res.stderr
    # Block mode, as a pool flushes: refused at once, and dCache flushes it again later.
    res = daemon.run(FAST, *put_args(daemon, pid, path_b, adler_b), timeout=30)
    assert (res.returncode, res.stdout) == (1, ""), res.stderr
    assert "being migrated from another file" in res.stderr
    # Poll mode too, and a poll of A's own still attaches.
    res = daemon.run(FAST, *put_args(daemon, pid, path_b, adler_b, "-mode=poll"))
    assert (res.returncode, res.stdout) == (1, ""), res.stderr
    assert daemon.run(FAST, *put_args(daemon, pid, path_a, adler_a, "-mode=poll")).returncode == 72
    assert metrics(daemon)["tssd_attach_refused_total"] == 2
    assert len(daemon.requests(kind="migrate")) == 1
    assert daemon.ctl("queues", "set", "atlas", "--resume").returncode == 0
    res, _ = poll(daemon, put_args(daemon, pid, path_a, adler_a, "-mode=poll"))
    assert res.returncode == 0, res.stderr
    uri_a = res.stdout.strip()
    # dCache's next flush of B: B's bytes are written, under their own URI.
    uri_b = put(daemon, pid, path_b, adler_b, *options(daemon))
    assert uri_b != uri_a
    copies = daemon.client().call("GET", f"/v1/catalog/copies/{pid}")["copies"]
    assert sorted(c["adler32"] for c in copies) == sorted([adler_a, adler_b])


def test_a_put_of_the_same_bytes_from_another_pool_still_attaches(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.start()
    pid = pnfsid(51)
    path_a, adler = pool_file(tmp_path / "poolA", pid, 3, 20_000)
    path_b, _ = pool_file(tmp_path / "poolB", pid, 3, 20_000)
    res = daemon.run(FAST, *put_args(daemon, pid, path_a, adler, "-mode=poll"))
    assert res.returncode == 72, res.stderr
    uri_b = put(daemon, pid, path_b, adler, *options(daemon))
    assert [r["uri"] for r in daemon.requests(kind="migrate")] == [uri_b]


def test_a_get_attached_to_another_pools_recall_leaves_it_to_that_pool(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.start()
    pid = pnfsid(52)
    source, adler = pool_file(tmp_path / "pool", pid, 4, 40_000)
    uri = put(daemon, pid, source, adler, *options(daemon))
    dest_a, dest_b = tmp_path / "poolA" / pid, tmp_path / "poolB" / pid
    dest_a.parent.mkdir()
    dest_b.parent.mkdir()
    args_a = [*get_args(pid, dest_a, 40_000, adler, uri), *options(daemon, "-mode=poll")]
    assert daemon.ctl("queues", "set", "atlas", "--pause").returncode == 0
    assert daemon.run(FAST, *args_a).returncode == 72
    # Pool B stages the same pnfsid in block mode: it attaches to A's recall and waits.
    waiting_b = start_get(daemon, [*get_args(pid, dest_b, 40_000, adler, uri), *options(daemon)])
    time.sleep(2)  # B's call reaches tssd while A's recall is still queued
    assert daemon.ctl("queues", "set", "atlas", "--resume").returncode == 0
    _, err_b = waiting_b.communicate(timeout=120)
    res, _ = poll(daemon, args_a)
    assert res.returncode == 0, res.stderr
    assert dest_a.read_bytes() == source.read_bytes()
    # One tape read for A: A's own recall, collected by A.
    for_a = [r for r in daemon.requests(kind="recall") if r["path"] == str(dest_a)]
    assert len(for_a) == 1, for_a
    if waiting_b.returncode != 0:  # B attached to A's: a clear answer, and dCache retries
        assert waiting_b.returncode == 1, err_b
        assert "another pool's path" in err_b, err_b
        assert not dest_b.exists()

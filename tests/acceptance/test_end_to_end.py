"""Walking skeleton, end to end with real processes: tssd serve, tss-hsm, tssctl."""

from __future__ import annotations

import random
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CLASSES = [("atlas", "tape"), ("cms", "raw"), ("lhcb", "archive")]
#: Each admitted: a class no [[storage_classes]] table admits is refused at submit.
CLASS_TABLES = "[" + ", ".join(f'{{name = "{s}:{g}"}}' for s, g in CLASSES) + "]"


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def make_files(root: Path, n: int, seed: int) -> list[tuple[str, Path, int, str, tuple[str, str]]]:
    """n real files of log-uniform random size from 1 B to 8 MiB, both ends included."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    files = []
    for i in range(n):
        size = 1 if i == 0 else 8 * 2**20 if i == 1 else int(2 ** rng.uniform(0, 23))
        path = root / pnfsid(i)
        path.write_bytes(rng.randbytes(size))
        files.append((pnfsid(i), path, size, adler32_file(path), CLASSES[i % len(CLASSES)]))
    return files


def test_put_get_remove_many(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env["TSSD_STORAGE_CLASSES"] = CLASS_TABLES
    daemon.start()
    files = make_files(tmp_path / "pool", 200, seed=7)
    uris: dict[str, str] = {}

    def put(f: tuple[str, Path, int, str, tuple[str, str]]) -> None:
        pid, path, size, adler, (store, group) = f
        res = daemon.hsm(
            "put",
            pid,
            str(path),
            f"-si={storage_info(size, adler, store, group)}",
            "-c:puts=5",
            "-hsmInstance=osm",
        )
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"osm://osm/?store={store}&group={group}&bfid="
        )
        uris[pid] = lines[0]

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))

    migrated = daemon.requests(kind="migrate")
    assert len(migrated) == 200 and all(r["state"] == "done" for r in migrated)
    assert len({r["volume"] for r in migrated}) >= 3  # one filling tape per storage class

    # Recall everything through tss-hsm, to other paths, as dCache would.
    out = tmp_path / "restored"
    out.mkdir()

    def get(f: tuple[str, Path, int, str, tuple[str, str]]) -> None:
        pid, _path, size, adler, (store, group) = f
        dest = out / pid
        res = daemon.hsm(
            "get",
            pid,
            str(dest),
            f"-si={storage_info(size, adler, store, group)}",
            f"-uri={uris[pid]}",
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout == ""
        assert (out / f"{pid}.crcval").read_text().splitlines()[0] == adler

    with ThreadPoolExecutor(24) as pool:
        list(pool.map(get, files))
    for pid, path, size, adler, _ in files:
        restored = out / pid
        assert restored.stat().st_size == size
        assert restored.read_bytes() == path.read_bytes()
        assert adler32_file(restored) == adler

    # Recalls queued together for one tape are served by one mount.
    mounts_before = len(daemon.mounts())
    listing = tmp_path / "list.txt"
    again = tmp_path / "again"
    again.mkdir()
    listing.write_text("".join(f"{pid} {again / pid}\n" for pid, *_ in files))
    res = daemon.ctl("recall", "--file-list", str(listing), "--wait", timeout=300)
    assert res.returncode == 0, res.stderr
    for pid, path, *_ in files:
        assert (again / pid).read_bytes() == path.read_bytes()
    new_mounts = daemon.mounts()[mounts_before:]
    volumes = [m["volume"] for m in new_mounts]
    assert len(volumes) == len(set(volumes)), f"a tape was mounted twice: {volumes}"

    # Remove a few copies; a later recall of them fails permanently (31).
    for pid, *_ in files[:10]:
        res = daemon.hsm("remove", f"-uri={uris[pid]}", "-hsmInstance=osm")
        assert res.returncode == 0, res.stderr
    pid, _path, size, adler, _ = files[0]
    res = daemon.hsm(
        "get", pid, str(tmp_path / "gone"), f"-si={storage_info(size, adler)}", f"-uri={uris[pid]}"
    )
    assert res.returncode == 31, (res.returncode, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gone").exists()

    status = daemon.ctl("status")
    assert status.returncode == 0, status.stderr
    assert daemon.stop(signal.SIGTERM) == 0


def test_concurrent_gets_of_one_file_share_one_request(daemon: Daemon, tmp_path: Path) -> None:
    # Hardware slow enough (a mount takes seconds) that both gets are surely in flight.
    daemon.extra_env["TSSD_SIM_TIME_SCALE"] = "0.05"
    daemon.start()
    [(pid, path, size, adler, _)] = make_files(tmp_path / "pool", 1, seed=3)
    res = daemon.hsm("put", pid, str(path), f"-si={storage_info(size, adler)}")
    assert res.returncode == 0, res.stderr
    uri = res.stdout.strip()
    dest = tmp_path / "dest"
    dest.mkdir()
    args = ("get", pid, str(dest / pid), f"-si={storage_info(size, adler)}", f"-uri={uri}")
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: daemon.hsm(*args), range(2)))
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert len(daemon.requests(kind="recall", pnfsid=pid)) == 1
    assert (dest / pid).read_bytes() == path.read_bytes()


@pytest.mark.persistent
def test_kill_9_during_recalls_loses_nothing(daemon: Daemon, tmp_path: Path) -> None:
    # Slow hardware so that recalls are surely in flight when tssd is killed.
    daemon.extra_env["TSSD_SIM_TIME_SCALE"] = "0.002"
    daemon.extra_env["TSSD_STORAGE_CLASSES"] = CLASS_TABLES
    daemon.start()
    files = make_files(tmp_path / "pool", 40, seed=11)
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(
                lambda f: daemon.hsm(
                    "put", f[0], str(f[1]), f"-si={storage_info(f[2], f[3], *f[4])}"
                ),
                files,
            )
        )
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    out = tmp_path / "out"
    out.mkdir()
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{f[0]} {out / f[0]}\n" for f in files))
    assert daemon.ctl("recall", "--file-list", str(listing)).returncode == 0
    daemon.wait_for(lambda: any(r["state"] == "active" for r in daemon.requests(kind="recall")))
    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    daemon.start()
    daemon.wait_for(
        lambda: all(r["state"] == "done" for r in daemon.requests(kind="recall")), timeout=240
    )
    recalls = daemon.requests(kind="recall")
    assert len(recalls) == 40
    for pid, path, *_ in files:
        assert (out / pid).read_bytes() == path.read_bytes()
    assert not list(out.glob(".*tssd-part"))
    assert daemon.stop() == 0

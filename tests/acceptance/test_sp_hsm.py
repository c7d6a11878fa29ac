"""The SP backend end to end: a real ``tssd serve`` on the stand-in client API library,
real ``tss-hsm`` put and get subprocesses, every byte compared; tssd SIGKILLed while it
archives, then restarted; ``tssctl backend selftest`` on sp.

The stand-in (tssd/backends/sp/standin) models IBM's libApiTSM64.so as GSI-HPC/ltsm
``src/lib/tsmapi.c`` calls it; the raw session of tests/sp_fixtures.py plays the admin
looking at the server's archive objects afterwards.
"""

from __future__ import annotations

import random
import signal
import time
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import Daemon, Result
from test_dcache_hsm import FAST, dcache_si, get_args, options, pnfsid

from tests.sp_fixtures import ApiClient
from tssd.backends.sp.standin import LIBRARY_NAME, ServerSettings, make_server
from tssd.files import adler32_hex

pytestmark = [pytest.mark.sp, pytest.mark.slow, pytest.mark.timeout(600)]


def sp_env(build: Path, server: Path, mount_points: int = 2) -> dict[str, str]:
    options_file = server / "dsm.opt"
    return {
        "TSSD_BACKEND_TYPE": "sp",
        "TSSD_BACKEND_RETRY_BASE_S": "0.05",
        "TSSD_SP_API_LIBRARY": str(build / LIBRARY_NAME),
        "TSSD_SP_OPTIONS_FILE": str(options_file),
        "TSSD_SP_NODE": "TSSD",
        "TSSD_SP_MAX_MOUNT_POINTS": str(mount_points),
        "TSSD_SP_ADMIN_COMMAND": (
            f"{build / 'dsmadmc'} -optfile={options_file} -dataonly=yes -comma"
        ),
        "TSSD_SP_BUFFER_SIZE": "65536",
    }


@pytest.fixture
def sp_daemon(daemon: Daemon, sp_build: Path, tmp_path: Path) -> Daemon:
    make_server(tmp_path / "server", ServerSettings(capacity_bytes=4 << 20, max_mount_points=2))
    daemon.extra_env.update(sp_env(sp_build, tmp_path / "server"))
    return daemon


def pool_files(
    directory: Path, count: int, sizes: Callable[[int], int]
) -> list[tuple[str, Path, str]]:
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(1, count + 1):
        data = random.Random(i).randbytes(sizes(i))
        path = directory / pnfsid(i)
        path.write_bytes(data)
        files.append((pnfsid(i), path, adler32_hex(zlib.adler32(data))))
    return files


def put(daemon: Daemon, pid: str, path: Path, adler: str, *extra: str) -> Result:
    si = dcache_si(path.stat().st_size, adler)
    return daemon.run(FAST, "put", pid, str(path), f"-si={si}", *options(daemon, *extra))


def get(daemon: Daemon, pid: str, dest: Path, size: int, adler: str, uri: str) -> Result:
    return daemon.run(FAST, *get_args(pid, dest, size, adler, uri), *options(daemon))


def archived(
    sp_client: Callable[[], ApiClient], server: Path, monkeypatch: pytest.MonkeyPatch
) -> Counter[str]:
    """Archive objects per pnfsid on the server, as its own query answers."""
    monkeypatch.setenv("DSMI_CONFIG", str(server / "dsm.opt"))
    return Counter(obj.ll.lstrip("/") for obj in sp_client().query("/*", "/*"))


def test_500_files_through_tss_hsm_put_and_get(
    sp_daemon: Daemon,
    tmp_path: Path,
    sp_client: Callable[[], ApiClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = pool_files(tmp_path / "pool", 500, lambda i: 1 + (i * 7919) % 60_000)
    sp_daemon.start()
    with ThreadPoolExecutor(16) as pool:
        puts = list(pool.map(lambda f: put(sp_daemon, *f), files))
    assert [r.returncode for r in puts] == [0] * 500, [r.stderr for r in puts if r.returncode][:3]
    uris = [r.stdout.strip() for r in puts]
    assert all("bfid=sp." in uri for uri in uris)
    back = tmp_path / "back"
    back.mkdir()

    def recall(args: tuple[tuple[str, Path, str], str]) -> Result:
        (pid, path, adler), uri = args
        return get(sp_daemon, pid, back / pid, path.stat().st_size, adler, uri)

    with ThreadPoolExecutor(16) as pool:
        gets = list(pool.map(recall, zip(files, uris, strict=True)))
    assert [r.returncode for r in gets] == [0] * 500, [r.stderr for r in gets if r.returncode][:3]
    for pid, path, adler in files:
        assert (back / pid).read_bytes() == path.read_bytes()
        assert (back / f"{pid}.crcval").read_text().strip() == adler
    copies = archived(sp_client, tmp_path / "server", monkeypatch)
    assert len(copies) == 500 and set(copies.values()) == {1}


def test_sigkill_mid_store_then_restart_loses_nothing_and_archives_nothing_twice(
    sp_daemon: Daemon,
    tmp_path: Path,
    sp_client: Callable[[], ApiClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tssd is killed while it archives (some objects committed, one being sent); after
    the restart dCache's put calls go on: each file ends archived exactly once."""
    files = pool_files(tmp_path / "pool", 24, lambda i: 2_000_000 + i)
    sp_daemon.start()
    with ThreadPoolExecutor(24) as pool:
        first = [pool.submit(put, sp_daemon, *f, "-mode=poll") for f in files]
        [f.result() for f in first]

        def writing() -> bool:
            events = sp_daemon.events()
            return any(e.get("event") == "request.done" for e in events)

        sp_daemon.wait_for(writing, timeout=120)
        sp_daemon.stop(signal.SIGKILL)
    stored_before = [e for e in sp_daemon.events() if e.get("event") == "request.done"]
    assert 0 < len(stored_before) < len(files)
    sp_daemon.start()
    uris: dict[str, str] = {}
    deadline = time.monotonic() + 300
    while len(uris) < len(files) and time.monotonic() < deadline:
        for pid, path, adler in files:
            if pid not in uris:
                res = put(sp_daemon, pid, path, adler, "-mode=poll")
                if res.returncode == 0:
                    uris[pid] = res.stdout.strip()
                else:
                    assert res.returncode == 72, res.stderr
        time.sleep(0.2)
    assert len(uris) == len(files)
    copies = archived(sp_client, tmp_path / "server", monkeypatch)
    assert copies == Counter({pid: 1 for pid, _, _ in files})
    back = tmp_path / "back"
    back.mkdir()
    for pid, path, adler in files:
        res = get(sp_daemon, pid, back / pid, path.stat().st_size, adler, uris[pid])
        assert res.returncode == 0, res.stderr
        assert (back / pid).read_bytes() == path.read_bytes()

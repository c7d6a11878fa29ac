"""The whole daemon on ``memory://``: the real ``tssd serve``, ``tss-hsm`` and ``tssctl``,
every book in the daemon's memory (tssd.db.books.memory_books) and the simulated library."""

from __future__ import annotations

import json
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PNFSID = "0000" + "AB" * 16


@pytest.fixture
def memory_daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(home=tmp_path / "home", db_url="memory://")
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop(signal.SIGKILL)


def test_a_file_stored_and_recalled_on_memory(memory_daemon: Daemon, tmp_path: Path) -> None:
    daemon = memory_daemon
    daemon.start()
    original = tmp_path / "pool" / PNFSID
    original.parent.mkdir()
    original.write_bytes(random.Random(5).randbytes(3 * 2**20 + 17))
    size, adler = original.stat().st_size, adler32_file(original)
    si = f"-si={storage_info(size, adler)}"

    put = daemon.hsm("put", PNFSID, str(original), si, "-hsmInstance=osm")
    assert put.returncode == 0, put.stderr
    uri = put.stdout.strip()
    assert uri.startswith("osm://osm/?store=atlas&group=tape&bfid="), uri

    # Recalled in block mode (tss-hsm waits for the file), to another path.
    restored = tmp_path / "restored" / PNFSID
    restored.parent.mkdir()
    get = daemon.hsm("get", PNFSID, str(restored), si, f"-uri={uri}")
    assert get.returncode == 0, get.stderr
    assert restored.read_bytes() == original.read_bytes()

    status = daemon.ctl("status", "--json")
    assert status.returncode == 0, status.stderr
    answer = json.loads(status.stdout)
    assert answer["database"] == "memory"
    assert answer["counts"]["recall"]["done"] == 1
    assert answer["counts"]["migrate"]["done"] == 1

    assert daemon.stop() == 0
    # Nothing to upgrade: the schema is the code's, made anew in each daemon's memory.
    upgrade = daemon.run("tssd", "db", "upgrade")
    assert upgrade.returncode == 0, upgrade.stderr
    assert "nothing to upgrade" in upgrade.stdout


def test_nothing_persists_across_a_restart(memory_daemon: Daemon, tmp_path: Path) -> None:
    """``tssd serve --database memory://`` wins over ``database.url`` (a SQLite file here,
    never made) and starts empty every time."""
    daemon = memory_daemon
    daemon.db_url = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    daemon.serve_args = ["--database", "memory://"]
    daemon.start()
    original = tmp_path / PNFSID
    original.write_bytes(b"once")
    si = f"-si={storage_info(4, adler32_file(original))}"
    assert daemon.hsm("put", PNFSID, str(original), si, "-hsmInstance=osm").returncode == 0
    assert len(daemon.requests()) == 1
    assert daemon.stop() == 0
    daemon.start()
    assert daemon.requests() == []
    assert daemon.stop() == 0
    assert not (tmp_path / "never.db").exists()

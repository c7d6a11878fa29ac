"""The attack of "storage classes grab cartridges" against a real ``tssd serve`` on its
embedded default (sim library): puts of 1-byte files in invented storage classes, more
classes than the library has cartridges, then a put of the README's class. Before, each
invented class took a whole cartridge and the real put failed "library full"; now they
are refused at submit (tss-hsm exits 1, the message names ``[[storage_classes]]``) and
the real put goes to tape."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from conftest import Daemon, storage_info

from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TAPES = 3


def test_invented_storage_classes_cannot_fill_the_library(daemon: Daemon, tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    daemon.extra_env.update(
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_SIM_TAPES=str(TAPES),
        TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="0.2",
    )
    daemon.start()
    for n in range(TAPES + 2):
        src = pool / f"junk{n}"
        src.write_bytes(b"x")
        si = storage_info(1, adler32_file(src), store="junk", group=f"c{n}")
        put = daemon.hsm("put", f"00EE{n:04X}", str(src), f"-si={si}", timeout=60)
        assert put.returncode == 1, put.stderr
        assert "[[storage_classes]]" in put.stderr and f"junk:c{n}" in put.stderr
    assert daemon.requests() == []  # refused before anything was recorded
    src = pool / "real"
    src.write_bytes(b"real data")
    si = storage_info(9, adler32_file(src))
    put = daemon.hsm("put", "00EF0001", str(src), f"-si={si}", timeout=120)
    assert put.returncode == 0, put.stderr
    assert "bfid=" in put.stdout
    assert daemon.stop(signal.SIGTERM) == 0

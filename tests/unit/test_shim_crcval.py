"""``<path>.crcval``, the file tss-hsm leaves for dCache after a recall.

dCache's ``modules/dcache/src/main/java/org/dcache/pool/nearline/script/
ScriptNearlineStorage.java`` (``readChecksumFromHsm``) reads ``<replica>.crcval`` after
exit 0 and deletes it; anything else tss-hsm leaves in the pool's data directory stays
there. The pool directory is writable by the pool's user, so a name planted there must
not make tss-hsm write outside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tssd.shim.poolfiles import write_crcval

PNFSID = "0000A1B2C3D4E5F60718293A4B5C6D7E8F90"
ADLER = "0a1b2c3d"


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    data = tmp_path / "pool" / "data"
    data.mkdir(parents=True)
    (data / PNFSID).write_bytes(b"recalled bytes")
    return data


def test_a_symlink_at_the_temporary_name_truncates_nothing_outside(
    pool: Path, tmp_path: Path
) -> None:
    """An attacker who can write the pool directory plants symlinks at the temporary
    names (the per-pid name of earlier versions and today's) towards a file tssd's and
    the pool's user may write: the file keeps its bytes and ``.crcval`` is right."""
    outside = tmp_path / "precious"
    outside.write_bytes(b"do not truncate me\n")
    target = pool / f"{PNFSID}.crcval"
    for name in (f"{target.name}.{os.getpid()}.tmp", f"{target.name}.tss-hsm.tmp"):
        (pool / name).symlink_to(outside)
    write_crcval(str(pool / PNFSID), ADLER)
    assert outside.read_bytes() == b"do not truncate me\n"
    assert target.read_text() == ADLER + "\n" and not target.is_symlink()
    assert not os.path.lexists(pool / f"{target.name}.tss-hsm.tmp")


def test_a_symlink_at_crcval_itself_is_replaced_not_followed(pool: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.write_bytes(b"keep\n")
    target = pool / f"{PNFSID}.crcval"
    target.symlink_to(outside)
    write_crcval(str(pool / PNFSID), ADLER)
    assert outside.read_bytes() == b"keep\n"
    assert not target.is_symlink() and target.read_text() == ADLER + "\n"


def test_a_killed_calls_temporary_file_does_not_stay(pool: Path) -> None:
    """A call SIGKILLed (dCache's ``destroyForcibly``, RunSystem.java) after writing its
    temporary file runs no clean-up; the next call of the same stage removes what it
    left, so the pool directory holds the replica and its ``.crcval`` only."""
    killed_after_write = (
        "import os, signal, sys\n"
        "from tssd.shim import poolfiles\n"
        "os.replace = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "poolfiles.write_crcval(sys.argv[1], 'ffffffff')\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", killed_after_write, str(pool / PNFSID)],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert child.returncode == -9, child.stderr
    assert len(list(pool.iterdir())) == 2  # the replica and the killed call's temporary
    write_crcval(str(pool / PNFSID), ADLER)
    assert sorted(p.name for p in pool.iterdir()) == [PNFSID, f"{PNFSID}.crcval"]
    assert (pool / f"{PNFSID}.crcval").read_text() == ADLER + "\n"

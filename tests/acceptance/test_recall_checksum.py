"""A recall whose expected checksum (dCache's ``flag-c``) is not the tape copy's leaves
nothing behind, with a real ``tssd serve`` and real ``tss-hsm`` processes: no part file
(the pool's claim mode) and no wrong bytes at the destination (direct delivery).
docs/reliability.md lists the attack with its expected and observed result.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from test_dcache_hsm import FAST, a_file, get_args, options, put
from test_pool_confinement import finished

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def not_the(adler: str) -> str:
    """Another well-formed adler32 than *adler*."""
    return f"{int(adler, 16) ^ 0x00010001:08x}"


def drives_enabled(daemon: Daemon) -> list[bool]:
    answer: dict[str, Any] = daemon.client().call("GET", "/v1/drives")
    return [bool(d["enabled"]) for d in answer["drives"]]


def test_claim_mode_get_with_a_wrong_flag_c_leaves_no_part_file(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 40, 54_321)
    uri = put(daemon, pid, path, adler, *options(daemon))
    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    res = daemon.run(FAST, *get_args(pid, dest, 54_321, not_the(adler), uri), *options(daemon))
    assert res.returncode == 31, res.stderr
    assert "does not match" in res.stderr
    request = finished(daemon, "recall", pid)
    assert request["state"] == "failed" and request["error_code"] == 31, request
    # Nothing at the path, nothing under the part file's name, no .crcval.
    assert os.listdir(dest.parent) == []
    # The pool's mistake (or a corrupt namespace entry), not the drive's.
    assert all(drives_enabled(daemon))
    # The right checksum still recalls the file.
    res = daemon.run(FAST, *get_args(pid, dest, 54_321, adler, uri), *options(daemon))
    assert res.returncode == 0, res.stderr
    assert dest.read_bytes() == path.read_bytes()


def test_direct_recall_with_a_wrong_checksum_writes_nothing(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 41, 43_210)
    put(daemon, pid, path, adler, *options(daemon))
    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    daemon.client().call("POST", "/v1/requests", {"kind": "recall", "pnfsid": pid,
                         "path": str(dest), "checksum": not_the(adler)})  # fmt: skip
    request = finished(daemon, "recall", pid)
    assert request["state"] == "failed" and request["error_code"] == 31, request
    assert "does not match" in request["error"], request
    assert os.listdir(dest.parent) == []


def test_a_right_flag_c_in_another_spelling_still_recalls(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 42, 12_345)
    put(daemon, pid, path, adler, *options(daemon))
    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    daemon.client().call("POST", "/v1/requests", {"kind": "recall", "pnfsid": pid,
                         "path": str(dest), "checksum": adler.upper()})  # fmt: skip
    request = finished(daemon, "recall", pid)
    assert request["state"] == "done", request
    assert dest.read_bytes() == path.read_bytes()

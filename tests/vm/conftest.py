"""The qemu guest of tests/vm, booted once per session for every ``vm`` test.

Without qemu or a kernel (tests/vm/install.sh not run) the tests skip, except under
``CI=true``, where they fail: CI must never go green by skipping the real SCSI stack.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scsivm import TAPE_MB, VOLUMES, GuestVM, VMError, kernel


def _missing() -> str | None:
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (tests/vm/install.sh)"
    try:
        kernel()
    except VMError as exc:
        return str(exc)
    if shutil.which("tgtd") is None or shutil.which("iscsiadm") is None:
        return "tgt / open-iscsi are not installed (tests/vm/install.sh)"
    return None


@pytest.fixture(scope="session")
def vm() -> Iterator[GuestVM]:
    missing = _missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"vm tests need the guest: {missing}")
        pytest.skip(missing)
    guest = GuestVM(drives=2, tapes=len(VOLUMES), tape_mb=TAPE_MB, memory_mb=1024)
    try:
        guest.start(timeout_s=120)
        assert guest.library is not None
        drives = ",".join(
            f"{serial}@{i}={st}" for i, (st, serial, _sg) in enumerate(guest.library.drives)
        )
        (guest.share / "vm.json").write_text(
            json.dumps(
                {
                    "changer": guest.library.changer,
                    "drives": drives,
                    "vtl": "/tmp/vtl",
                    "tape_mb": TAPE_MB,
                    "volumes": " ".join(VOLUMES),
                }
            )
        )
        yield guest
    finally:
        guest.stop()

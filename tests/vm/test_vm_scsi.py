"""The SCSI backend on a real Linux SCSI stack (tests/vm): tgt's changer and drives seen
through the kernel's st and sg drivers over iSCSI, driven by the real ``mtx``.

The guest is slow (software emulation), so the work done inside it is small and the
heavy checks (every byte of 500 files) are done here on the host, on files the guest
wrote into the shared directory.
"""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
import zlib

import pytest
from scsivm import GuestVM, guest_python

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]

KiB = 1024
BLOCK = 8 * KiB  # guest_roundtrip.py's scsi.block_size
PYTEST = "-m pytest -p no:cacheprovider -p no:schemathesis -p no:hypothesispytest --timeout 600"


def test_backend_contract_on_st_and_mtx(vm: GuestVM) -> None:
    """tests/integration/test_backend_contract.py with the ``scsi-st`` backend only."""
    report = vm.share / "contract.xml"
    rc, out = guest_python(
        vm,
        f"{PYTEST} -q tests/integration/test_backend_contract.py --junitxml={report}",
        timeout_s=800,
    )
    assert rc == 0, out[-6000:]
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    cases = [c.get("name") for c in suite.iter("testcase")]
    assert len(cases) >= 15 and all(c and c.endswith("[scsi-st]") for c in cases), cases
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert suite.get("skipped") == "0", out[-3000:]


def test_500_files_round_trip_with_rollover(vm: GuestVM) -> None:
    """500 files through st and mtx; the guest reads them back, the host compares bytes."""
    rng = random.Random(20)
    inbox = vm.share / "in"
    inbox.mkdir()
    manifest, originals = [], {}
    for n in range(500):
        size = rng.choice([0, 1, BLOCK, BLOCK + 1]) if n % 25 == 0 else rng.randrange(16 * KiB)
        data = rng.randbytes(size)
        pnfsid = f"0000{n:032X}"
        (inbox / pnfsid).write_bytes(data)
        originals[pnfsid] = data
        manifest.append(
            {
                "name": pnfsid,
                "pnfsid": pnfsid,
                "size": size,
                "class": "atlas:tape" if n < 300 else "cms:tape",
                "adler32": f"{zlib.adler32(data):08x}",
            }
        )
    (inbox / "manifest.json").write_text(json.dumps(manifest))
    rc, out = guest_python(vm, "tests/vm/guest_roundtrip.py", timeout_s=800)
    assert rc == 0, out[-6000:]
    line = next(x for x in out.splitlines() if x.startswith("ROUNDTRIP "))
    summary = json.loads(line.removeprefix("ROUNDTRIP "))
    print(json.dumps({k: v for k, v in summary.items() if k != "copies"}))
    assert summary["files"] == 500
    assert summary["rollovers"] >= 1, "no end-of-tape rollover happened"
    assert len(summary["volumes"]) >= 3
    assert summary["recall_loads"] >= len(vm.library.drives if vm.library else [])
    # tgt rejects LOCATE: every drive that positioned fell back to spacing filemarks.
    assert set(summary["positioning"].values()) == {"rewind+space filemarks (no LOCATE)"}
    # The changer names the drive behind each element (READ ELEMENT STATUS, DVCID), in
    # the order of st's devices here; tgt cuts the last element's name short (None).
    assert vm.library is not None
    serials = [s for _, s, _ in vm.library.drives]
    named = [e[2] for e in summary["elements"]]
    assert [e[0] for e in summary["elements"]] == [256, 257]  # addresses as reported
    assert named[0] == serials[0]
    assert all(n in (None, s) for n, s in zip(named, serials, strict=True))
    out_dir = vm.share / "out"
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(originals)
    for pnfsid, data in originals.items():
        assert (out_dir / pnfsid).read_bytes() == data, pnfsid
    positions = {}
    for pnfsid, volume, position, adler in summary["copies"]:
        assert adler == f"{zlib.adler32(originals[pnfsid]):08x}"
        positions.setdefault(volume, []).append(position)
    assert all(len(set(p)) == len(p) for p in positions.values())

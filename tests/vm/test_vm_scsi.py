"""The SCSI backend on a real Linux SCSI stack (tests/vm): tgt's changer and drives seen
through the kernel's st and sg drivers over iSCSI, driven by the real ``mtx``.

The guest is slow (software emulation), so the work done inside it is small and the
heavy checks (every byte of 500 files) are done here on the host, on files the guest
wrote into the shared directory.
"""

from __future__ import annotations

import json
import random
import sys
import xml.etree.ElementTree as ET
import zlib

import pytest
from scsivm import REPO, GuestVM, guest_python

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
    # tgt rejects READ END OF WRAP POSITION (ILLEGAL REQUEST): each drive was asked once,
    # learnt it unsupported, and RAO got the nominal LTO-8 geometry (3 % spread).
    assert set(summary["wrap_reports"].values()) == {False}
    assert all(g == [0, 0.03] for g in summary["geometries"]), summary["geometries"]
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


def test_selftest_on_real_library(vm: GuestVM) -> None:
    """``tssctl backend selftest`` as an operator runs it, on st and mtx, with
    ``scsi.drives = "auto"``: the drives are found from the changer and st alone."""
    assert vm.library is not None
    config = vm.share / "selftest.toml"
    config.write_text(
        '[backend]\ntype = "scsi"\n\n[scsi]\n'
        f'changer = "{vm.library.changer}"\nmtx = "mtx"\ndrives = "auto"\n'
        'device_layer = "st"\nblock_size = 65536\nvolumes = "^TSS"\n'
    )
    loaded = (
        r"s/^Data Transfer Element \([0-9]*\):Full (Storage Element \([0-9]*\) Loaded).*/\2 \1/p"
    )
    unload = (
        f"mtx -f {vm.library.changer} status | sed -n '{loaded}'"
        f" | while read s d; do mtx -f {vm.library.changer} unload $s $d; done\n"
    )
    script = (
        unload + f"cd {REPO}\nexport PYTHONDONTWRITEBYTECODE=1 TSSD_HOME=/tmp/selftest-home\n"
        f"exec {sys.executable} -m tssd.cli.tssctl backend selftest --config {config} "
        "--volume TSS008L8 --json\n"
    )
    result = vm.run(script, 600)
    assert result.rc == 0, result.output[-4000:]
    steps = json.loads(result.output[result.output.index("[") :])
    assert all(s["ok"] for s in steps), steps
    serials = next(s for s in steps if s["step"] == "drives")["detail"]
    assert all(serial in serials for _, serial, _ in vm.library.drives), serials
    located = next(s for s in steps if s["step"] == "locate+read")
    assert "rewind+space filemarks" in located["detail"]


def test_faults_on_real_library(vm: GuestVM) -> None:
    """Cartridge removed, drive offline, writer SIGKILLed: see tests/vm/guest_faults.py."""
    rc, out = guest_python(vm, "tests/vm/guest_faults.py", timeout_s=800)
    assert rc == 0, out[-6000:]
    faults = {
        line.split()[1]: json.loads(line.split(" ", 2)[2])
        for line in out.splitlines()
        if line.startswith("FAULT ")
    }
    print(json.dumps(faults, indent=1))
    removed = faults["removed"]
    assert "transient" in removed["while_gone"] and removed["put_back"] == "ok"
    offline = faults["offline"]
    # st says EIO; the drive is offline, so it is the drive's fault (transient), and the
    # cartridge is neither disabled nor closed: it mounts again once the drive is back.
    assert offline["write"].startswith("DriveNotReady/transient"), offline
    assert offline["remount"] == "ok"
    killed = faults["killed"]
    assert killed["catalog_before"] == ["0000" + "A" * 32]
    assert killed["c_error"] is None
    assert all(ok for _, ok, _ in killed["reads"]) and all(killed["same"])
    # The restarted process found the cartridge still in the drive, and C took the place
    # (tape file 2) where the killed object B had started, right after A.
    assert killed["loaded_after_restart"][next(iter(killed["loaded_after_restart"]))]
    assert killed["positions"] == {"0000" + "A" * 32: 1, "0000" + "C" * 32: 2}

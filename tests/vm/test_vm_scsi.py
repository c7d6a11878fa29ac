"""The SCSI backend on a real Linux SCSI stack (tests/vm): tgt's changer and drives seen
through the kernel's st and sg drivers over iSCSI, driven by the real ``mtx``.

The guest is slow (software emulation), so the work done inside it is small and the
heavy checks (every byte of 500 files) are done here on the host, on files the guest
wrote into the shared directory.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from scsivm import GuestVM, guest_python

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]

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

"""What the real stack (tests/vm) showed, checked here without it: LOCATE rejected with
ILLEGAL REQUEST (tgt's usr/ssc.c has no LOCATE), positioning by rewind and MTFSF as the
kernel's st driver counts files (drivers/scsi/st.c, st_int_ioctl: MTFSF advances
drv_file and zeroes drv_block), sense decoding, READ ELEMENT STATUS with DVCID
(tgt's usr/smc.c add_element_descriptor) and drives mapped to elements by serial."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tssd.backends.scsi import devices, sgio
from tssd.backends.scsi.emulated import FileTape, init_library, load_state, save_state
from tssd.backends.scsi.sense import ILLEGAL_REQUEST, LocateUnsupported, Sense, decode
from tssd.backends.scsi.tapedev import Tape
from tssd.cli import views
from tssd.errors import ConfigError


def test_fixed_format_sense() -> None:
    raw = bytes([0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x20, 0x00]) + bytes(4)
    sense = decode(raw)
    assert sense == Sense(ILLEGAL_REQUEST, 0x20, 0)
    assert sense.unsupported
    assert str(sense) == "illegal request: invalid command operation code"
    eom = decode(bytes([0x70, 0, 0x40, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0]))
    assert eom is not None and eom.eom and not eom.unsupported


def test_descriptor_format_sense() -> None:
    assert decode(bytes([0x72, 0x03, 0x11, 0x00, 0, 0, 0, 0])) == Sense(0x3, 0x11, 0)
    assert decode(b"") is None


def _element(address: int, serial: str, voltag: bool) -> bytes:
    out = address.to_bytes(2, "big") + bytes(10)
    if voltag:
        out += b"TSS001L8".ljust(36, b" ")
    ident = b"IBM     " + b"ULT3580-TD8".ljust(16) + serial.encode()
    return out + bytes([2, 1, 0, len(ident)]) + ident


def _reply(elements: list[bytes], truncate: int = 0) -> bytes:
    size = len(elements[0])
    body = b"".join(elements)
    page = bytes([4, 0x80, *size.to_bytes(2, "big"), 0, *len(body).to_bytes(3, "big")]) + body
    data = (256).to_bytes(2, "big") + len(elements).to_bytes(2, "big") + bytes(1)
    data += len(page).to_bytes(3, "big") + page
    return data[: len(data) - truncate]


def test_element_status_names_the_drives() -> None:
    data = _reply([_element(257, "TSSD000002", True), _element(256, "TSSD000001", True)])
    assert sgio.parse_element_status(data) == [
        sgio.DriveElement(256, 0, "TSSD000001"),
        sgio.DriveElement(257, 1, "TSSD000002"),
    ]


def test_truncated_identifier_is_unknown() -> None:
    """tgt's reply length leaves out the page header: the last name arrives cut short."""
    data = _reply([_element(256, "TSSD000001", True), _element(257, "TSSD000002", True)], 8)
    assert [e.serial for e in sgio.parse_element_status(data)] == ["TSSD000001", None]


def test_auto_drives_by_serial_and_elimination(monkeypatch: pytest.MonkeyPatch) -> None:
    elements = [sgio.DriveElement(256, 0, "B"), sgio.DriveElement(257, 1, None)]
    monkeypatch.setattr(sgio, "drive_identifiers", lambda changer: elements)
    specs = devices.auto_drives("/dev/sg9", {"A": "/dev/nst1", "B": "/dev/nst0"})
    assert specs == [devices.DriveSpec("B", 0, "/dev/nst0"), devices.DriveSpec("A", 1, "/dev/nst1")]
    with pytest.raises(ConfigError, match="element"):
        devices.auto_drives("/dev/sg9", {"A": "/dev/nst1", "B": "/dev/nst0", "C": "/dev/nst2"})


def test_auto_needs_st() -> None:
    with pytest.raises(ConfigError, match="device_layer"):
        devices.resolve_drives("auto", "file")


@pytest.fixture
def no_locate_tape(tmp_path: Path) -> Iterator[FileTape]:
    root = tmp_path / "vtl"
    init_library(root, drives=1, slots=2, tapes=1, import_export=0, capacity=10**6)
    state = load_state(root)
    state["drives"][0].update(volume=state["slots"][0]["volume"], source=1)
    state["slots"][0]["volume"] = None
    save_state(root, state)
    serial = (root / "nst0" / "serial").read_text().strip()
    (root / "faults.json").write_text(json.dumps({"locate_unsupported": [serial]}))
    device = FileTape(str(root / "nst0"))
    yield device
    device.close()


async def test_locate_rejected_falls_back_to_spacing(no_locate_tape: FileTape) -> None:
    tape = Tape(no_locate_tape)
    with pytest.raises(LocateUnsupported):
        no_locate_tape.seek(2)
    # label, filemark, then three one-block objects each followed by a filemark
    await tape.write_block(b"L")
    await tape.write_filemark()
    for n in range(3):
        await tape.write_block(bytes([n]) * 10)
        await tape.write_filemark()
    assert tape.positioning.locate is None
    for fileno in (2, 3, 1, 1):  # forward, forward, backwards (rewind), same place
        await tape.position(2 * fileno, fileno)
        status = await tape.status()
        assert (status.file_number, status.block_number) == (fileno, 0)
        assert await tape.read_block(100) == bytes([fileno - 1]) * 10
        assert await tape.read_block(100) == b""  # the filemark: st's file count moves on
        assert (await tape.status()).file_number == fileno + 1
    assert tape.positioning.locate is False
    assert "no LOCATE" in tape.positioning.describe()
    assert "illegal request" in tape.positioning.detail


def test_tssctl_drives_shows_the_positioning() -> None:
    drives = [
        {"name": "TSSD000001", "enabled": True, "state": "idle", "volume": None,
         "positioning": "rewind+space filemarks (no LOCATE)", "last_error": "x" * 200},
        {"name": "TSSD000002", "enabled": True, "state": "idle", "volume": None},
    ]  # fmt: skip
    text = views.drives_table(drives)
    assert "POSITIONING" in text.splitlines()[0]
    assert "no LOCATE" in text or "rewind+space" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert "POSITIONING" not in views.drives_table(drives[1:])

"""``mtx status`` / ``mtx inquiry`` parsing on real-world output shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tssd.backends.scsi.inventory import (
    DriveElement,
    InventoryError,
    SlotElement,
    parse_inquiry,
    parse_status,
)

DATA = Path(__file__).parent / "data"


def sample(name: str) -> str:
    return (DATA / f"mtx_status_{name}.txt").read_text()


def test_mhvtl() -> None:
    inv = parse_status(sample("mhvtl"))
    assert inv.changer == "/dev/sg8"
    assert inv.drives == [
        DriveElement(0, True, "E01001L8", 1),
        DriveElement(1, False),
        DriveElement(2, True, "E01003L8", 3),
        DriveElement(3, False),
    ]
    assert len(inv.slots) == 24
    assert sum(s.import_export for s in inv.slots) == 4
    assert inv.slot_of("E01002L8") == SlotElement(2, True, "E01002L8")
    assert inv.drive_of("E01003L8") == DriveElement(2, True, "E01003L8", 3)
    # A cartridge in the mail slot is not in the library yet.
    assert inv.slot_of("E01021L8") is None
    assert "E01021L8" not in inv.volumes()
    assert {"CLN101L1", "E01001L8", "E01016L8"} <= set(inv.volumes())
    assert inv.empty_slots() == [1, 3, 19, 20]


def test_ibm_ts3500_with_padded_tags_and_io_station() -> None:
    inv = parse_status(sample("ibm_ts3500"))
    assert inv.changer == "/dev/tape/by-id/scsi-3500110a0012345678"
    assert len(inv.drives) == 6
    assert inv.drive(0) == DriveElement(0, True, "GK1033L8", 33)
    assert inv.drive(3) == DriveElement(3, True, "GK1007L8", 7)
    assert [d.index for d in inv.drives if not d.full] == [1, 2, 4, 5]
    storage = [s for s in inv.slots if not s.import_export]
    io_station = [s for s in inv.slots if s.import_export]
    assert (len(storage), len(io_station)) == (40, 16)
    # "Empty:VolumeTag=" (an empty slot with an empty tag) is empty, without volume.
    assert inv.slot_of("GK1007L8") is None  # it is in drive 3
    assert storage[6] == SlotElement(7, False)
    assert io_station[0] == SlotElement(41, True, "GK2000L8", import_export=True)
    assert inv.empty_slots() == [7, 33, 37, 38, 39, 40]
    assert len(inv.volumes()) == 36


def test_autoloader_with_sense_chatter_unknown_source_and_no_barcode() -> None:
    inv = parse_status(sample("autoloader"))
    assert inv.drives == [DriveElement(0, True, "000105L6", None)]
    assert inv.slots[1] == SlotElement(2, True, "000102L6")
    # Full without a barcode: a cartridge tssd cannot name, hence cannot use.
    assert inv.slots[2] == SlotElement(3, True, None)
    assert inv.volumes() == ["000101L6", "000102L6", "000104L6", "000105L6"]
    assert inv.slots[-1] == SlotElement(16, False, import_export=True)


def test_emulator_output_parses_like_mtx() -> None:
    text = (
        "  Storage Changer /tmp/vtl:2 Drives, 4 Slots ( 1 Import/Export )\n"
        "Data Transfer Element 0:Empty\n"
        "Data Transfer Element 1:Full (Storage Element 2 Loaded):VolumeTag = E01002L8\n"
        "      Storage Element 1:Full :VolumeTag=E01001L8\n"
        "      Storage Element 2:Empty\n"
        "      Storage Element 3:Empty\n"
        "      Storage Element 4 IMPORT/EXPORT:Empty\n"
    )
    inv = parse_status(text)
    assert inv.drive(1) == DriveElement(1, True, "E01002L8", 2)
    assert inv.volumes() == ["E01001L8", "E01002L8"]


@pytest.mark.parametrize(
    "text",
    ["", "mtx: cannot open SCSI device '/dev/sg9' - No such file or directory\n", "garbage"],
)
def test_not_status_output(text: str) -> None:
    with pytest.raises(InventoryError):
        parse_status(text)


def test_inquiry() -> None:
    text = (
        "Product Type: Medium Changer\n"
        "Vendor ID: 'IBM     '\n"
        "Product ID: '03584L32        '\n"
        "Revision: 'F030'\n"
        "Attached Changer API: No\n"
    )
    fields = parse_inquiry(text)
    assert fields["Vendor ID"] == "IBM"
    assert fields["Product ID"] == "03584L32"
    assert fields["Product Type"] == "Medium Changer"

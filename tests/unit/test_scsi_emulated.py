"""The emulated devices behave like the st driver and mtx: same errno values, same text."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from tssd.backends.scsi import emulated
from tssd.backends.scsi.changer import Changer, ChangerTimeout
from tssd.backends.scsi.emulated import FileTape, init_library, save_faults
from tssd.backends.scsi.tapedev import DriveNotReady, EndOfMedium, MediaError, Tape, WriteProtected
from tssd.errors import PermanentBackendError, TransientBackendError

MTXEMU = [sys.executable, "-m", "tssd.backends.scsi.mtxemu"]


@pytest.fixture
def vtl(tmp_path: Path) -> Path:
    root = tmp_path / "vtl"
    init_library(
        root, drives=2, slots=4, tapes=3, import_export=1, capacity=10_000, early_warning=1000
    )
    return root


def changer(root: Path, move_timeout_s: float = 30.0) -> Changer:
    return Changer(MTXEMU, str(root), move_timeout_s=move_timeout_s, status_timeout_s=30.0)


def loaded(root: Path, slot: int = 1, drive: int = 0) -> FileTape:
    state = emulated.load_state(root)
    state["drives"][drive].update(volume=state["slots"][slot - 1]["volume"], source=slot)
    state["slots"][slot - 1]["volume"] = None
    emulated.save_state(root, state)
    return FileTape(str(root / f"nst{drive}"))


def test_empty_drive_has_no_medium(vtl: Path) -> None:
    with pytest.raises(OSError) as info:
        FileTape(str(vtl / "nst0"))
    assert info.value.errno == errno.ENOMEDIUM


def test_blocks_filemarks_positions(vtl: Path) -> None:
    tape = loaded(vtl)
    assert tape.status().bot and tape.status().eod
    tape.write_block(b"a" * 100)
    tape.write_filemark()
    tape.write_block(b"b" * 100)
    tape.write_block(b"c" * 50)
    assert tape.tell() == 4
    tape.seek(2)
    assert tape.read_block(100) == b"b" * 100
    tape.rewind()
    assert tape.read_block(100) == b"a" * 100
    assert tape.read_block(100) == b""  # the filemark
    tape.seek(3)
    with pytest.raises(OSError) as info:
        tape.read_block(10)  # block of 50 bytes into a 10-byte buffer
    assert info.value.errno == errno.ENOMEM
    with pytest.raises(OSError) as info:
        tape.read_block(100)  # past the end of data: blank check
    assert info.value.errno == errno.EIO
    with pytest.raises(OSError):
        tape.seek(9)
    tape.close()
    # The data stays with the cartridge: reopen and find it.
    again = FileTape(str(vtl / "nst0"))
    again.seek(3)
    assert again.read_block(100) == b"c" * 50
    again.close()


def test_writing_in_the_middle_truncates(vtl: Path) -> None:
    tape = loaded(vtl)
    for ch in b"abcd":
        tape.write_block(bytes([ch]) * 10)
    tape.seek(1)
    tape.write_block(b"x" * 10)
    assert tape.status().eod
    tape.seek(1)
    assert tape.read_block(10) == b"x" * 10
    with pytest.raises(OSError):
        tape.read_block(10)
    tape.close()


def test_early_warning_end_of_medium(vtl: Path) -> None:
    tape = loaded(vtl)
    for _ in range(9):  # 9000 bytes: the last 1000 of 10000 are the early-warning zone
        tape.write_block(b"z" * 1000)
    with pytest.raises(OSError) as info:
        tape.write_block(b"z" * 1000)
    assert info.value.errno == errno.ENOSPC
    tape.write_filemark()  # a filemark still fits, as on a real drive
    tape.close()


async def test_tape_translates_errors(vtl: Path) -> None:
    loaded(vtl, slot=1, drive=0).close()
    save_faults(vtl, {"not_ready": {"EMU_A1": 1}, "write_protected": ["E01002L8"]})
    with pytest.raises(DriveNotReady):
        await Tape.open(FileTape, str(vtl / "nst0"))
    tape = await Tape.open(FileTape, str(vtl / "nst0"))  # became ready
    await tape.write_block(b"q" * 900)
    await tape.write_blocks([b"q" * 900] * 9)
    with pytest.raises(EndOfMedium):
        await tape.write_block(b"q" * 900)
    with pytest.raises(MediaError):
        await tape.seek(99)
    await tape.close()
    with pytest.raises(DriveNotReady):
        await Tape.open(FileTape, str(vtl / "nst1"))
    protected = Tape(loaded(vtl, slot=2, drive=1))
    with pytest.raises(WriteProtected):
        await protected.write_block(b"x")
    await protected.close()


async def test_mtx_emulator_commands(vtl: Path) -> None:
    robot = changer(vtl)
    inquiry = await robot.inquiry()
    assert inquiry["Product Type"] == "Medium Changer"
    inv = await robot.status()
    assert [s.volume for s in inv.slots] == ["E01001L8", "E01002L8", "E01003L8", None, None]
    assert inv.slots[-1].import_export
    await robot.load(2, 1)
    inv = await robot.status()
    assert inv.drive(1) is not None and inv.drive(1).volume == "E01002L8"  # type: ignore[union-attr]
    assert inv.drive(1).source == 2  # type: ignore[union-attr]
    assert (vtl / "nst1" / "medium").read_text() == "E01002L8"
    with pytest.raises(TransientBackendError, match="Full"):
        await robot.load(1, 1)
    with pytest.raises(TransientBackendError, match="is Empty"):
        await robot.load(2, 0)
    with pytest.raises(PermanentBackendError, match="Invalid"):
        await robot.load(99, 0)
    await robot.unload(4, 1)
    await robot.transfer(4, 2)
    inv = await robot.status()
    assert inv.slot_of("E01002L8") is not None and inv.slot_of("E01002L8").number == 2  # type: ignore[union-attr]
    assert all(not d.full for d in inv.drives)


async def test_hung_load_is_killed(vtl: Path) -> None:
    save_faults(vtl, {"hang_load_s": 30})
    with pytest.raises(ChangerTimeout):
        await changer(vtl, move_timeout_s=0.5).load(1, 0)
    # The emulator died before moving anything; the next command works.
    inv = await changer(vtl).status()
    assert inv.drive(0) is not None and not inv.drive(0).full  # type: ignore[union-attr]


async def test_missing_mtx_binary_is_a_config_error(vtl: Path) -> None:
    from tssd.errors import ConfigError

    robot = Changer("/nonexistent/mtx", str(vtl), move_timeout_s=1, status_timeout_s=1)
    with pytest.raises(ConfigError):
        await robot.status()


async def test_missing_changer_device_is_permanent(tmp_path: Path) -> None:
    with pytest.raises(PermanentBackendError, match="cannot open"):
        await changer(tmp_path).status()

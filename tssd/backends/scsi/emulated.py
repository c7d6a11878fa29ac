"""An emulated tape library in a directory: file-backed drives and cartridges, the state
the ``mtx``-compatible changer (:mod:`.mtxemu`) moves them in, and injectable faults.

It exists so that the SCSI backend can be tested, and demonstrated, on a host without
mhVTL's kernel module or tape hardware, through the same code path as real devices: the
backend runs the changer as an ``mtx`` subprocess and opens each drive through the
:class:`~tssd.backends.scsi.tapedev.TapeDevice` interface, which :class:`FileTape`
implements with the ``errno`` values of the Linux st driver.

Layout of the directory::

    library.json        drives (serial, device, loaded volume, source slot), slots, media
    lock                serialises changer commands (flock)
    faults.json         optional fault injection, see FAULTS
    tapes/VOLSER.tape   one cartridge: records of (kind, length, payload)
    nst0/, nst1/, ...   one drive: ``serial`` and ``medium`` (the loaded volume, or empty);
                        ``unloaded`` once the drive unloaded it (the robot has not taken it)

Create one with ``python3 -m tssd.backends.scsi.emulated init DIR``. Only the standard
library is imported: the changer emulator starts in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tssd.backends.scsi.drivestatus import DriveStatus
from tssd.backends.scsi.sense import (
    ILLEGAL_REQUEST,
    CommandUnsupported,
    LocateUnsupported,
    Sense,
)
from tssd.backends.scsi.sgio import WrapEnd

#: Fault injection (faults.json): what a test or a demo can make the library do.
FAULTS = {
    "not_ready": "{serial: n}: the next n opens of that drive fail with EIO (becoming ready)",
    "hang_load_s": "seconds the next load sleeps before moving (a hung robot)",
    "media_errors": "{volume: [block ids]}: reading or locating to those blocks fails (EIO)",
    "write_protected": "[volumes] whose write-protect tab is set",
    "locate_unsupported": "[serials] of drives that reject LOCATE like tgt (ILLEGAL REQUEST)",
    "wrap_blocks": "{serial: n}: that drive answers READ END OF WRAP POSITION, n logical "
    "objects per wrap (the others reject it like tgt)",
}

_RECORD = struct.Struct(">cI")
_DATA, _MARK = b"B", b"F"


class EmulationError(RuntimeError):
    """The emulation directory is missing or damaged."""


# -- library state ------------------------------------------------------------------------


def _state_path(root: Path) -> Path:
    return root / "library.json"


def load_state(root: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads(_state_path(root).read_text())
    except (OSError, ValueError) as exc:
        raise EmulationError(f"{root} is not an emulated library: {exc}") from exc
    return state


def save_state(root: Path, state: dict[str, Any]) -> None:
    temp = root / ".library.json.tmp"
    temp.write_text(json.dumps(state, indent=1))
    os.replace(temp, _state_path(root))
    for drive in state["drives"]:
        medium, volume = root / drive["device"] / "medium", drive["volume"] or ""
        if not medium.exists() or medium.read_text() != volume:
            # The robot moved a cartridge: one put into the drive is loaded (threaded).
            (root / drive["device"] / "unloaded").unlink(missing_ok=True)
            medium.write_text(volume)


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    with open(root / "lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def load_faults(root: Path) -> dict[str, Any]:
    try:
        faults: dict[str, Any] = json.loads((root / "faults.json").read_text())
    except FileNotFoundError:
        return {}
    return faults


def save_faults(root: Path, faults: dict[str, Any]) -> None:
    (root / "faults.json").write_text(json.dumps(faults))


def volume_name(index: int, prefix: str = "E01", suffix: str = "L8") -> str:
    """mhVTL-style barcodes: E01001L8, E01002L8, ..."""
    return f"{prefix}{index:03d}{suffix}"


def init_library(
    root: Path,
    *,
    drives: int = 2,
    slots: int = 10,
    tapes: int = 4,
    import_export: int = 2,
    capacity: int = 64 * 1024 * 1024,
    early_warning: int = 0,
) -> dict[str, Any]:
    """Create an emulated library (idempotent: an existing one is returned as it is)."""
    root = Path(root)
    if _state_path(root).exists():
        return load_state(root)
    if tapes > slots:
        raise EmulationError(f"{tapes} tapes do not fit in {slots} slots")
    (root / "tapes").mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "vendor": "TSSD",
        "product": "EMULATED-LIB",
        "capacity": capacity,
        # Early warning: the last part of the tape, where writes fail with ENOSPC.
        "early_warning": early_warning or max(capacity // 50, 1),
        "drives": [],
        "slots": [],
    }
    for i in range(drives):
        device = f"nst{i}"
        (root / device).mkdir(exist_ok=True)
        serial = f"EMU_A{i + 1}"
        (root / device / "serial").write_text(serial)
        state["drives"].append({"serial": serial, "device": device, "volume": None, "source": None})
    for n in range(1, slots + import_export + 1):
        volume = volume_name(n) if n <= tapes else None
        if volume:
            (root / "tapes" / f"{volume}.tape").touch()
        state["slots"].append({"number": n, "volume": volume, "ie": n > slots})
    save_state(root, state)
    return state


def drive_spec(root: Path) -> str:
    """The ``scsi.drives`` value for this library: SERIAL@ELEMENT=DEVICE, ..."""
    state = load_state(root)
    return ",".join(
        f"{d['serial']}@{i}={root / d['device']}" for i, d in enumerate(state["drives"])
    )


# -- a cartridge image --------------------------------------------------------------------


class _Image:
    """A tape as records on a file: data blocks and filemarks, capacity, early warning."""

    def __init__(self, path: Path, capacity: int, early_warning: int) -> None:
        self.path = path
        self.capacity = capacity
        self.early_warning = early_warning
        self.fh = open(path, "r+b")  # noqa: SIM115 - closed in close()
        #: (kind, file offset of the payload, payload length) per logical object.
        self.records: list[tuple[bytes, int, int]] = []
        #: Payload bytes before each record, plus the total at the end.
        self.used: list[int] = [0]
        self._scan()

    def _scan(self) -> None:
        offset, size = 0, os.fstat(self.fh.fileno()).st_size
        while offset + _RECORD.size <= size:
            self.fh.seek(offset)
            kind, length = _RECORD.unpack(self.fh.read(_RECORD.size))
            self._append(kind, offset + _RECORD.size, length)
            offset += _RECORD.size + length

    def _append(self, kind: bytes, payload_at: int, length: int) -> None:
        self.records.append((kind, payload_at, length))
        self.used.append(self.used[-1] + length)

    def truncate(self, position: int) -> None:
        """Writing anywhere makes that point the end of data, as on a real tape."""
        if position < len(self.records):
            _, payload_at, _ = self.records[position]
            self.fh.truncate(payload_at - _RECORD.size)
            del self.records[position:]
            del self.used[position + 1 :]

    def write(self, position: int, kind: bytes, payload: bytes) -> None:
        self.truncate(position)
        end = self.used[-1] + len(payload)
        limit = self.capacity - (self.early_warning if kind == _DATA else 0)
        if end > limit:
            raise OSError(errno.ENOSPC, "No space left on device (end of medium)")
        self.fh.seek(0, os.SEEK_END)
        at = self.fh.tell()
        self.fh.write(_RECORD.pack(kind, len(payload)) + payload)
        self._append(kind, at + _RECORD.size, len(payload))

    def read(self, position: int) -> tuple[bytes, bytes]:
        kind, payload_at, length = self.records[position]
        self.fh.seek(payload_at)
        return kind, self.fh.read(length)

    def close(self) -> None:
        self.fh.close()


class FileTape:
    """An emulated drive (``TapeDevice``): opening it fails like st when it is empty."""

    def __init__(self, path: str) -> None:
        self.path = path
        drive = Path(path)
        self.root = drive.parent
        serial = (drive / "serial").read_text().strip()
        volume = (drive / "medium").read_text().strip()
        if not volume or (drive / "unloaded").exists():
            raise OSError(errno.ENOMEDIUM, "No medium found", path)
        with locked(self.root):
            faults = load_faults(self.root)
            pending = faults.get("not_ready", {}).get(serial, 0)
            if pending > 0:
                faults["not_ready"][serial] = pending - 1
                save_faults(self.root, faults)
                raise OSError(errno.EIO, "Input/output error (becoming ready)", path)
        state = load_state(self.root)
        self.volume = volume
        self.write_protected = volume in faults.get("write_protected", [])
        self.bad_blocks = set(faults.get("media_errors", {}).get(volume, []))
        self.no_locate = serial in faults.get("locate_unsupported", [])
        self.wrap_blocks = int(faults.get("wrap_blocks", {}).get(serial, 0))
        self._image = _Image(
            self.root / "tapes" / f"{volume}.tape", state["capacity"], state["early_warning"]
        )
        self._pos = 0

    def close(self) -> None:
        self._image.close()

    def status(self) -> DriveStatus:
        records = self._image.records
        marks = [i for i, (kind, _, _) in enumerate(records[: self._pos]) if kind == _MARK]
        return DriveStatus(
            online=True,
            bot=self._pos == 0,
            eod=self._pos == len(records),
            write_protected=self.write_protected,
            file_number=len(marks),
            block_number=self._pos - (marks[-1] + 1 if marks else 0),
        )

    def rewind(self) -> None:
        self._pos = 0

    def tell(self) -> int:
        return self._pos

    def seek(self, block: int) -> None:
        if self.no_locate:
            raise LocateUnsupported(self.path, Sense(ILLEGAL_REQUEST, 0x20))
        if block > len(self._image.records) or block in self.bad_blocks:
            raise OSError(errno.EIO, f"Input/output error (locate to block {block})")
        self._pos = block

    def space_filemarks(self, count: int) -> None:
        """MTFSF (count > 0): past the next *count* filemarks; EIO at end of data."""
        records = self._image.records
        while count > 0:
            if self._pos >= len(records) or self._pos in self.bad_blocks:
                raise OSError(errno.EIO, "Input/output error (end of data while spacing)")
            if records[self._pos][0] == _MARK:
                count -= 1
            self._pos += 1
        while count < 0:
            if self._pos == 0:
                raise OSError(errno.EIO, "Input/output error (beginning of tape while spacing)")
            self._pos -= 1
            if records[self._pos][0] == _MARK:
                count += 1

    def _write(self, kind: bytes, payload: bytes) -> None:
        if self.write_protected:
            raise OSError(errno.EROFS, "Read-only file system (write protected)")
        self._image.write(self._pos, kind, payload)
        self._pos += 1

    def write_block(self, data: bytes) -> None:
        self._write(_DATA, data)

    def write_filemark(self) -> None:
        self._write(_MARK, b"")

    def read_block(self, size: int) -> bytes:
        if self._pos >= len(self._image.records) or self._pos in self.bad_blocks:
            raise OSError(errno.EIO, "Input/output error (blank check or medium error)")
        kind, payload = self._image.read(self._pos)
        self._pos += 1
        if kind == _MARK:
            return b""
        if len(payload) > size:
            raise OSError(errno.ENOMEM, "Cannot allocate memory (block larger than buffer)")
        return payload

    def offline(self) -> None:
        """Rewind and unload: the cartridge stays in the drive until the robot takes it."""
        self._pos = 0
        (Path(self.path) / "unloaded").touch()

    def ready(self) -> bool:
        return True

    def end_of_wrap_positions(self) -> list[WrapEnd]:
        """Rejected like tgt (usr/spc.c, spc_service_action: MAINTENANCE IN knows only
        service action 0Ch; others: ILLEGAL REQUEST, invalid field in CDB), unless set
        to report wraps of ``wrap_blocks`` logical objects, as an IBM LTO-7+ would: the
        last object of each full wrap, then the last object written."""
        if self.wrap_blocks <= 0:
            raise CommandUnsupported(
                self.path, "READ END OF WRAP POSITION", Sense(ILLEGAL_REQUEST, 0x24)
            )
        written = len(self._image.records)
        full = max(0, written - 1) // self.wrap_blocks
        ends = [WrapEnd(w, 0, (w + 1) * self.wrap_blocks - 1) for w in range(full)]
        return [*ends, WrapEnd(full, 0, max(0, written - 1))]


# -- command line: create a library for a demo --------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tssd.backends.scsi.emulated",
        description="Create an emulated tape library and print the tssd settings using it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="create an emulated library in DIR")
    init.add_argument("dir", type=Path)
    init.add_argument("--drives", type=int, default=2)
    init.add_argument("--slots", type=int, default=10)
    init.add_argument("--tapes", type=int, default=4)
    init.add_argument("--import-export", type=int, default=2)
    init.add_argument("--capacity", type=int, default=64 * 1024 * 1024, help="bytes per tape")
    args = parser.parse_args(argv)
    root = args.dir.resolve()
    init_library(
        root,
        drives=args.drives,
        slots=args.slots,
        tapes=args.tapes,
        import_export=args.import_export,
        capacity=args.capacity,
    )
    sys.stdout.write(
        '[backend]\ntype = "scsi"\n\n[scsi]\n'
        f'changer = "{root}"\n'
        f'mtx = "{sys.executable} -m tssd.backends.scsi.mtxemu"\n'
        f'drives = "{drive_spec(root)}"\n'
        'device_layer = "file"\n'
        f"tape_capacity = {args.capacity}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which drives tssd uses: ``scsi.drives`` entries, matched by serial number.

An entry is ``SERIAL@ELEMENT[=DEVICE]``. The serial number names the drive in tssd and
ties the changer's Data Transfer Element (what ``mtx load`` addresses) to the st device
the data goes through. The device's own serial (VPD page 0x80) is checked against the
entry at start-up, so drives renumbered by a reboot (nst0 and nst1 swapped) are refused
instead of writing to the wrong cartridge; without DEVICE the st device is found by serial.

``scsi.drives = "auto"`` needs no table at all: the changer names the drive in each Data
Transfer Element (READ ELEMENT STATUS with DVCID, :func:`.sgio.drive_identifiers`) and
each st device's own serial (VPD page 0x80) finds its element. An element the changer
does not name is matched by elimination when exactly one element and one st device are
left over; otherwise tssd refuses to guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tssd.backends.scsi import sgio
from tssd.backends.scsi.tapedev import Opener, StTape, TapeDevice, find_st_device, st_serial
from tssd.errors import ConfigError

_ENTRY = re.compile(r"^(?P<serial>[^@=\s]+)@(?P<element>\d+)(?:=(?P<device>\S+))?$")
LAYERS = ("st", "file")


@dataclass(frozen=True, slots=True)
class DriveSpec:
    serial: str
    element: int
    device: str


def parse_drives(text: str) -> list[tuple[str, int, str | None]]:
    """(serial, element, device or None) per entry of ``scsi.drives``."""
    entries: list[tuple[str, int, str | None]] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        m = _ENTRY.fullmatch(raw.strip())
        if m is None:
            raise ConfigError(f"scsi.drives: {raw.strip()!r} is not SERIAL@ELEMENT[=DEVICE]")
        entries.append((m.group("serial"), int(m.group("element")), m.group("device")))
    if not entries:
        raise ConfigError("scsi.drives is empty: list the drives as SERIAL@ELEMENT[=DEVICE]")
    for what, values in (("serial", [e[0] for e in entries]), ("element", [e[1] for e in entries])):
        if len(set(values)) != len(values):
            raise ConfigError(f"scsi.drives: a drive {what} appears twice")
    return entries


def file_serial(path: str) -> str | None:
    try:
        return (Path(path) / "serial").read_text().strip() or None
    except OSError:
        return None


def _layer(layer: str) -> tuple[Callable[[str], str | None], Callable[[str], str | None]]:
    if layer == "st":
        return st_serial, find_st_device
    if layer == "file":
        return file_serial, lambda _serial: None
    raise ConfigError(f"scsi.device_layer {layer!r}: valid choices are 'st', 'file'")


AUTO = "auto"


def st_devices() -> dict[str, str]:
    """Serial number -> no-rewind st device, for every st drive the kernel knows."""
    found = {}
    for entry in sorted(Path("/sys/class/scsi_tape").glob("nst*")):
        if entry.name[3:].isdigit():
            serial = st_serial(f"/dev/{entry.name}")
            if serial:
                found[serial] = f"/dev/{entry.name}"
    return found


def auto_drives(changer: str, devices: dict[str, str]) -> list[DriveSpec]:
    """Map the changer's Data Transfer Elements to st devices by the drives' serials."""
    try:
        elements = sgio.drive_identifiers(changer)
    except OSError as exc:
        raise ConfigError(f"scsi.drives = auto: cannot read {changer}'s elements: {exc}") from exc
    specs, unnamed = [], []
    left = dict(devices)
    for element in elements:
        if element.serial and element.serial in left:
            specs.append(DriveSpec(element.serial, element.index, left.pop(element.serial)))
        else:
            unnamed.append(element)
    if len(unnamed) == 1 and len(left) == 1:
        serial, device = left.popitem()
        specs.append(DriveSpec(serial, unnamed[0].index, device))
    elif unnamed:
        where = ", ".join(str(e.address) for e in unnamed)
        raise ConfigError(
            f"scsi.drives = auto: no st device matches the drive in element(s) {where}; "
            "list the drives as SERIAL@ELEMENT[=DEVICE]"
        )
    if not specs:
        raise ConfigError(f"scsi.drives = auto: {changer} reports no drives")
    return sorted(specs, key=lambda s: s.element)


def resolve_drives(text: str, layer: str, changer: str = "") -> list[DriveSpec]:
    """The drives of ``scsi.drives`` with their devices found and their serials checked."""
    if text.strip() == AUTO:
        if layer != "st":
            raise ConfigError("scsi.drives = auto needs device_layer = st")
        return auto_drives(changer, st_devices())
    serial_of, find = _layer(layer)
    specs = []
    for serial, element, device in parse_drives(text):
        path = device or find(serial)
        if path is None:
            raise ConfigError(f"scsi.drives: no tape device reports serial {serial}")
        actual = serial_of(path)
        if actual is not None and actual != serial:
            raise ConfigError(
                f"scsi.drives: {path} is drive {actual}, not {serial}: device numbering changed?"
            )
        specs.append(DriveSpec(serial, element, path))
    return specs


def opener(layer: str) -> Opener:
    """How to open a drive of this device layer (a :class:`TapeDevice` factory)."""
    _layer(layer)
    if layer == "file":
        from tssd.backends.scsi.emulated import FileTape

        return _as_opener(FileTape)
    return _as_opener(StTape)


def _as_opener(cls: Callable[[str], TapeDevice]) -> Opener:
    return cls

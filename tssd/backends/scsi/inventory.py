"""What the changer holds, parsed from ``mtx status`` and ``mtx inquiry`` output.

mtx numbers data transfer elements (drives) from 0 and storage elements (slots, including
import/export slots) from 1, and prints, one element a line::

      Storage Changer /dev/sg5:4 Drives, 44 Slots ( 4 Import/Export )
    Data Transfer Element 0:Empty
    Data Transfer Element 1:Full (Storage Element 3 Loaded):VolumeTag = E01003L8
    Data Transfer Element 2:Full (Unknown Storage Element Loaded):VolumeTag = E01009L8
          Storage Element 1:Full :VolumeTag=E01001L8
          Storage Element 41 IMPORT/EXPORT:Empty

Libraries vary: no barcode reader (no ``VolumeTag``), an empty tag, ``AlternateVolumeTag``,
trailing blanks, padding, and SCSI sense chatter before the table. Lines that are not
elements are ignored; a reply with no element at all is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class InventoryError(ValueError):
    """The text is not ``mtx status`` output."""


@dataclass(frozen=True, slots=True)
class DriveElement:
    index: int
    full: bool
    volume: str | None = None
    #: Storage element the cartridge came from, when the changer knows it.
    source: int | None = None


@dataclass(frozen=True, slots=True)
class SlotElement:
    number: int
    full: bool
    volume: str | None = None
    import_export: bool = False


@dataclass(frozen=True, slots=True)
class Inventory:
    drives: list[DriveElement] = field(default_factory=list)
    slots: list[SlotElement] = field(default_factory=list)
    changer: str | None = None

    def drive(self, index: int) -> DriveElement | None:
        return next((d for d in self.drives if d.index == index), None)

    def slot_of(self, volume: str) -> SlotElement | None:
        """The storage slot holding *volume* (never an import/export slot)."""
        return next((s for s in self.slots if s.volume == volume and not s.import_export), None)

    def drive_of(self, volume: str) -> DriveElement | None:
        return next((d for d in self.drives if d.volume == volume), None)

    def empty_slots(self) -> list[int]:
        return [s.number for s in self.slots if not s.full and not s.import_export]

    def volumes(self) -> list[str]:
        """Every labelled cartridge in a storage slot or a drive (not in import/export)."""
        found = [s.volume for s in self.slots if s.volume and not s.import_export]
        found += [d.volume for d in self.drives if d.volume]
        return sorted(set(found))


_TAG = r"(?::\s*VolumeTag\s*=\s*(?P<tag>[^:\s]*))?(?:\s*:\s*AlternateVolumeTag\s*=\s*\S*)?"
_HEADER = re.compile(r"^\s*Storage Changer\s+(?P<dev>\S+?):\s*(?P<drives>\d+)\s+Drives?,")
_DRIVE = re.compile(
    r"^\s*Data Transfer Element\s+(?P<index>\d+)\s*:\s*(?P<state>Empty|Full)"
    r"(?:\s*\((?:Storage Element\s+(?P<source>\d+)|Unknown Storage Element)\s+Loaded\))?" + _TAG,
    re.IGNORECASE,
)
_SLOT = re.compile(
    r"^\s*Storage Element\s+(?P<number>\d+)(?P<ie>\s+IMPORT/EXPORT)?\s*:\s*"
    r"(?P<state>Empty|Full)\s*" + _TAG,
    re.IGNORECASE,
)


def _tag(match: re.Match[str]) -> str | None:
    tag = match.group("tag")
    return tag.strip() or None if tag else None


def parse_status(text: str) -> Inventory:
    """The :class:`Inventory` of an ``mtx status`` reply."""
    drives: list[DriveElement] = []
    slots: list[SlotElement] = []
    changer = None
    for line in text.splitlines():
        if m := _HEADER.match(line):
            changer = m.group("dev")
        elif m := _DRIVE.match(line):
            full = m.group("state").lower() == "full"
            source = m.group("source")
            drives.append(
                DriveElement(
                    int(m.group("index")),
                    full,
                    _tag(m) if full else None,
                    int(source) if source else None,
                )
            )
        elif m := _SLOT.match(line):
            full = m.group("state").lower() == "full"
            slots.append(
                SlotElement(
                    int(m.group("number")),
                    full,
                    _tag(m) if full else None,
                    import_export=bool(m.group("ie")),
                )
            )
    if not drives and not slots:
        first = text.strip().splitlines()[:1]
        raise InventoryError(f"no elements in mtx status output: {first!r}")
    return Inventory(drives, slots, changer)


def parse_inquiry(text: str) -> dict[str, str]:
    """``mtx inquiry``'s fields (``Vendor ID``, ``Product ID``, ...), quotes stripped."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip()] = value.strip().strip("'").strip()
    return fields

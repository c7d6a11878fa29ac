"""SCSI sense data as a value, and what tssd concludes from it.

The st driver reduces every failed command to an ``errno`` (mostly ``EIO``); where tssd
must tell "the drive does not implement this command" from "the medium is bad" it sends
the command itself through the sg driver (:mod:`.sgio`) and reads the sense data.
Fixed-format (0x70/0x71) and descriptor-format (0x72/0x73) sense are decoded (SPC-4
4.5). Its own module, without asyncio, so the emulated devices can raise
:class:`LocateUnsupported` too.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

NO_SENSE, RECOVERED_ERROR, NOT_READY, MEDIUM_ERROR = 0x0, 0x1, 0x2, 0x3
HARDWARE_ERROR, ILLEGAL_REQUEST, UNIT_ATTENTION, DATA_PROTECT = 0x4, 0x5, 0x6, 0x7
BLANK_CHECK, VOLUME_OVERFLOW = 0x8, 0xD

KEYS = {
    NO_SENSE: "no sense",
    RECOVERED_ERROR: "recovered error",
    NOT_READY: "not ready",
    MEDIUM_ERROR: "medium error",
    HARDWARE_ERROR: "hardware error",
    ILLEGAL_REQUEST: "illegal request",
    UNIT_ATTENTION: "unit attention",
    DATA_PROTECT: "data protect",
    BLANK_CHECK: "blank check",
    0xB: "aborted command",
    VOLUME_OVERFLOW: "volume overflow",
}

#: The additional sense codes tssd reports by name (SPC-4 annex F, the tape subset).
ASC = {
    (0x00, 0x00): "no additional sense information",
    (0x00, 0x01): "filemark detected",
    (0x00, 0x02): "end-of-partition/medium detected",
    (0x00, 0x04): "beginning-of-partition/medium detected",
    (0x00, 0x05): "end-of-data detected",
    (0x04, 0x01): "logical unit is in process of becoming ready",
    (0x0C, 0x00): "write error",
    (0x11, 0x00): "unrecovered read error",
    (0x14, 0x00): "recorded entity not found",
    (0x20, 0x00): "invalid command operation code",
    (0x21, 0x01): "invalid element address",
    (0x24, 0x00): "invalid field in CDB",
    (0x27, 0x00): "write protected",
    (0x28, 0x00): "not ready to ready change, medium may have changed",
    (0x29, 0x00): "power on, reset, or bus device reset occurred",
    (0x30, 0x00): "incompatible medium installed",
    (0x31, 0x00): "medium format corrupted",
    (0x3A, 0x00): "medium not present",
    (0x3B, 0x0E): "medium source element empty",
    (0x3B, 0x0D): "medium destination element full",
    (0x3B, 0x00): "sequential positioning error",
    (0x50, 0x00): "write append error",
}


@dataclass(frozen=True, slots=True)
class Sense:
    key: int
    asc: int = 0
    ascq: int = 0
    filemark: bool = False
    eom: bool = False

    @property
    def unsupported(self) -> bool:
        """The device does not implement the command (or this form of it)."""
        return self.key == ILLEGAL_REQUEST and self.asc in (0x20, 0x24)

    def __str__(self) -> str:
        key = KEYS.get(self.key, f"sense key {self.key:#x}")
        text = ASC.get((self.asc, self.ascq), f"asc/ascq {self.asc:#04x}/{self.ascq:#04x}")
        flags = "".join((", filemark" if self.filemark else "", ", EOM" if self.eom else ""))
        return f"{key}: {text}{flags}"


def decode(data: bytes) -> Sense | None:
    """The sense in *data* (what the device returned), or None if there is none."""
    if len(data) < 2:
        return None
    code = data[0] & 0x7F
    if code in (0x70, 0x71) and len(data) >= 3:
        asc = data[12] if len(data) > 12 else 0
        ascq = data[13] if len(data) > 13 else 0
        flags = data[2]
        return Sense(flags & 0x0F, asc, ascq, bool(flags & 0x80), bool(flags & 0x40))
    if code in (0x72, 0x73) and len(data) >= 4:
        return Sense(data[1] & 0x0F, data[2], data[3])
    return None


class LocateUnsupported(OSError):
    """The drive rejects LOCATE (ILLEGAL REQUEST): position by rewinding and spacing
    filemarks instead. An ``OSError`` with ``EIO``, like the st driver's failure."""

    def __init__(self, path: str, sense: Sense | None) -> None:
        super().__init__(errno.EIO, f"LOCATE not supported ({sense or 'no sense data'})", path)
        self.sense = sense


class CommandUnsupported(OSError):
    """The drive rejects a command it need not implement (ILLEGAL REQUEST): READ END OF
    WRAP POSITION on tgt, mhVTL, drives before IBM LTO-7."""

    def __init__(self, path: str, command: str, sense: Sense | None) -> None:
        super().__init__(errno.EIO, f"{command} not supported ({sense or 'no sense data'})", path)
        self.sense = sense

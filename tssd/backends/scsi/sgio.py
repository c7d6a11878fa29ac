"""SCSI commands through the Linux sg driver (``SG_IO``), for what st and mtx do not say.

* :func:`vpd_serial` - a device's unit serial number (INQUIRY, VPD page 0x80), the
  fallback when sysfs has no ``vpd_pg80``.
* :func:`drive_identifiers` - READ ELEMENT STATUS of the Data Transfer Elements with
  DVCID set: the changer names the drive (its serial number) behind each element, so
  ``scsi.drives = "auto"`` needs no table from the library's management interface.
* :func:`locate` - LOCATE(10), only to read the sense of a locate the st driver reported
  as a bare ``EIO``: ILLEGAL REQUEST means the drive does not implement it.
* :func:`end_of_wrap_positions` - READ END OF WRAP POSITION (IBM LTO-7 and later): the
  logical object at the end of each wrap, which places every object on its wrap (RAO).
* :func:`sg_of` - the sg device of an st device (sysfs).

Blocking calls; the callers run them in a worker thread (or at start-up).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from tssd.backends.scsi.sense import Sense, decode

SG_IO = 0x2285
SG_DXFER_NONE, SG_DXFER_FROM_DEV = -1, -3
TIMEOUT_MS = 60_000


class SgIoHdr(ctypes.Structure):
    """struct sg_io_hdr (include/scsi/sg.h)."""

    _fields_ = [
        ("interface_id", ctypes.c_int),
        ("dxfer_direction", ctypes.c_int),
        ("cmd_len", ctypes.c_ubyte),
        ("mx_sb_len", ctypes.c_ubyte),
        ("iovec_count", ctypes.c_ushort),
        ("dxfer_len", ctypes.c_uint),
        ("dxferp", ctypes.c_void_p),
        ("cmdp", ctypes.c_void_p),
        ("sbp", ctypes.c_void_p),
        ("timeout", ctypes.c_uint),
        ("flags", ctypes.c_uint),
        ("pack_id", ctypes.c_int),
        ("usr_ptr", ctypes.c_void_p),
        ("status", ctypes.c_ubyte),
        ("masked_status", ctypes.c_ubyte),
        ("msg_status", ctypes.c_ubyte),
        ("sb_len_wr", ctypes.c_ubyte),
        ("host_status", ctypes.c_ushort),
        ("driver_status", ctypes.c_ushort),
        ("resid", ctypes.c_int),
        ("duration", ctypes.c_uint),
        ("info", ctypes.c_uint),
    ]


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    sense: Sense | None
    data: bytes
    host_status: int = 0

    @property
    def good(self) -> bool:
        return self.status == 0 and self.host_status == 0


def command(path: str, cdb: bytes, in_len: int = 0, timeout_ms: int = TIMEOUT_MS) -> Reply:
    """Send *cdb* to the sg device *path*; read up to *in_len* bytes back."""
    cdb_buf = ctypes.create_string_buffer(cdb, len(cdb))
    sense_buf = ctypes.create_string_buffer(64)
    data_buf = ctypes.create_string_buffer(max(in_len, 1))
    hdr = SgIoHdr(
        interface_id=ord("S"),
        dxfer_direction=SG_DXFER_FROM_DEV if in_len else SG_DXFER_NONE,
        cmd_len=len(cdb),
        mx_sb_len=len(sense_buf),
        dxfer_len=in_len,
        dxferp=ctypes.addressof(data_buf),
        cmdp=ctypes.addressof(cdb_buf),
        sbp=ctypes.addressof(sense_buf),
        timeout=timeout_ms,
    )
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, SG_IO, hdr)
    finally:
        os.close(fd)
    sense = decode(sense_buf.raw[: hdr.sb_len_wr]) if hdr.sb_len_wr else None
    got = max(in_len - hdr.resid, 0)
    return Reply(hdr.status, sense, data_buf.raw[:got], hdr.host_status)


def sg_of(st_path: str) -> str | None:
    """``/dev/sgN`` of the st device *st_path* (``/dev/nst0``), from sysfs."""
    name = Path(os.path.realpath(st_path)).name
    found = sorted((Path("/sys/class/scsi_tape") / name / "device" / "scsi_generic").glob("sg*"))
    return f"/dev/{found[0].name}" if found else None


def vpd_serial(path: str) -> str | None:
    """The unit serial number (INQUIRY VPD page 0x80) of the device at *path*."""
    reply = command(path, bytes([0x12, 0x01, 0x80, 0x00, 0xFF, 0x00]), 0xFF)
    if not reply.good or len(reply.data) < 4:
        return None
    serial = reply.data[4 : 4 + reply.data[3]].decode("ascii", errors="replace").strip(" \0")
    return serial or None


def locate(path: str, block: int) -> Reply:
    """LOCATE(10) to logical object *block* in the current partition."""
    cdb = bytes([0x2B, 0x00, 0x00, *block.to_bytes(4, "big"), 0x00, 0x00, 0x00])
    return command(path, cdb)


#: READ END OF WRAP POSITION: MAINTENANCE IN (A3h), service action 1Fh, qualifier 45h
#: (CTA tapeserver/castor/tape/tapeserver/SCSI/Structures.hpp, readEndOfWrapPositionCDB_t,
#: after IBM's LTO-8 SCSI Reference p. 119).
REOWP_OPCODE, REOWP_SERVICE_ACTION, REOWP_QUALIFIER = 0xA3, 0x1F, 0x45
#: Bytes per wrap descriptor of the long form, and wraps asked for room for (LTO-9 has
#: 280; CTA sizes its reply for 280, LTO-10 has more).
WRAP_DESCRIPTOR, MAX_WRAPS = 12, 1024


@dataclass(frozen=True, slots=True)
class WrapEnd:
    wrap: int
    partition: int
    #: The logical object identifier (block id) of the last object of the wrap; the
    #: drive's last descriptor is the end of data instead.
    object_id: int


def end_of_wrap_cdb(allocation: int = 4 + WRAP_DESCRIPTOR * MAX_WRAPS) -> bytes:
    """The CDB asking for every wrap's end (WNV 0, RA 1: the long form)."""
    return bytes([
        REOWP_OPCODE, REOWP_SERVICE_ACTION, REOWP_QUALIFIER, 0x02, 0, 0,
        *allocation.to_bytes(4, "big"), 0, 0,
    ])  # fmt: skip


def end_of_wrap_positions(path: str) -> Reply:
    """READ END OF WRAP POSITION, long form, on the sg device *path*."""
    cdb = end_of_wrap_cdb()
    return command(path, cdb, int.from_bytes(cdb[6:10], "big"))


def parse_end_of_wrap(data: bytes) -> list[WrapEnd]:
    """The wrap descriptors of a long-form reply: response data length (2 bytes, the
    bytes that follow it), 2 reserved, then per wrap: wrap number (2), partition (2),
    2 reserved, logical object identifier (6), all big-endian (CTA's
    readEndOfWrapPositionDataLongForm_t and DriveLTO::getEndOfWrapPositions)."""
    if len(data) < 4:
        return []
    end = min(len(data), 2 + int.from_bytes(data[0:2], "big"))
    out = []
    for at in range(4, end - WRAP_DESCRIPTOR + 1, WRAP_DESCRIPTOR):
        d = data[at : at + WRAP_DESCRIPTOR]
        out.append(
            WrapEnd(
                int.from_bytes(d[0:2], "big"),
                int.from_bytes(d[2:4], "big"),
                int.from_bytes(d[6:12], "big"),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class DriveElement:
    #: The element's address as the changer reports it (not mtx's 0-based number).
    address: int
    #: mtx's Data Transfer Element number: the element's rank in address order.
    index: int
    #: The drive's serial number, or None if the changer does not report it (no DVCID).
    serial: str | None


def drive_identifiers(changer: str) -> list[DriveElement]:
    """The changer's Data Transfer Elements with the serial number of the drive in each."""
    alloc = 0xFFFF
    cdb = bytes([0xB8, 0x04, 0x00, 0x00, 0xFF, 0xFF, 0x01, 0x00, alloc >> 8, alloc & 0xFF, 0, 0])
    reply = command(changer, cdb, alloc)
    if not reply.good:
        raise OSError(f"READ ELEMENT STATUS on {changer} failed: {reply.sense or reply.status}")
    return parse_element_status(reply.data)


def parse_element_status(data: bytes) -> list[DriveElement]:
    """Data Transfer Element descriptors of a READ ELEMENT STATUS reply (SMC-3 6.11)."""
    elements: list[tuple[int, str | None]] = []
    if len(data) < 8:
        return []
    end = min(len(data), 8 + int.from_bytes(data[5:8], "big"))
    page = 8
    while page + 8 <= end:
        etype, flags = data[page], data[page + 1]
        size = int.from_bytes(data[page + 2 : page + 4], "big")
        count = int.from_bytes(data[page + 5 : page + 8], "big")
        first = page + 8
        for at in range(first, min(first + count, end), max(size, 1)):
            if etype & 0x0F != 4 or at + 12 > end:
                continue
            ident_at = at + 12 + (36 if flags & 0x80 else 0) + (36 if flags & 0x40 else 0)
            elements.append(
                (int.from_bytes(data[at : at + 2], "big"), _identifier(data[ident_at : at + size]))
            )
        page = first + count
    ordered = sorted(elements)
    return [DriveElement(addr, i, serial) for i, (addr, serial) in enumerate(ordered)]


def _identifier(raw: bytes) -> str | None:
    if len(raw) < 4 or raw[3] == 0 or len(raw) < 4 + raw[3]:
        # Absent, or cut short: tgt's reply length leaves out the 8-byte element status
        # page header, so the last element's identifier arrives truncated (usr/smc.c).
        return None
    ident = raw[4 : 4 + raw[3]]
    # T10 vendor identification: vendor (8), product (16), then the serial number.
    if raw[1] & 0x0F == 1 and len(ident) > 24:
        ident = ident[24:]
    return ident.decode("ascii", errors="replace").strip(" \0") or None

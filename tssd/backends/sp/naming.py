"""How tssd names its objects on the SP server and reads back what it wrote.

An archive object lives in filespace ``sp.filespace``, high level ``/<storage class>``,
low level ``/<pnfsid>``; its ``objInfo`` carries the size and adler32 tssd wrote, so the
catalog answers them without reading the data. The bfid dCache records is the object id.
A copy's volume is the ``top`` and ``hi_hi`` words of its ``restoreOrderExt``; the other
three give its order on the volume.
"""

from __future__ import annotations

from dataclasses import dataclass

from tssd.errors import ConfigError, InvalidRequest

#: Marks objInfo written by tssd: "tssd1 <size> <adler32 or ->".
OBJINFO_TAG = "tssd1"
BFID_PREFIX = "sp."


@dataclass(frozen=True, slots=True)
class ObjectName:
    filespace: str
    high: str
    low: str


def object_name(filespace: str, storage_class: str, pnfsid: str) -> ObjectName:
    return ObjectName(filespace, f"/{storage_class}", f"/{pnfsid}")


def pnfsid_of(low: str) -> str:
    return low.lstrip("/").upper()


def storage_class_of(high: str) -> str:
    return high.lstrip("/")


def bfid_of(object_id: int) -> str:
    return f"{BFID_PREFIX}{object_id}"


def object_id_of(bfid: str) -> int:
    """The object id a bfid names; InvalidRequest for a bfid another backend made."""
    digits = bfid.removeprefix(BFID_PREFIX)
    if not bfid.startswith(BFID_PREFIX) or not digits.isdigit() or int(digits) >= 1 << 64:
        raise InvalidRequest(f"{bfid!r} is not an SP object id bfid ({BFID_PREFIX}N)")
    return int(digits)


def encode_objinfo(size: int, adler32: str | None) -> bytes:
    return f"{OBJINFO_TAG} {size} {adler32 or '-'}".encode("ascii")


def decode_objinfo(raw: bytes) -> tuple[int | None, str | None]:
    """(size, adler32) from objInfo; (None, None) for objects tssd did not write."""
    parts = raw.split(b"\0", 1)[0].decode("ascii", "replace").split()
    if len(parts) != 3 or parts[0] != OBJINFO_TAG or not parts[1].isdigit():
        return None, None
    return int(parts[1]), (None if parts[2] == "-" else parts[2])


def volume_key(top: int, hi_hi: int) -> str:
    """The opaque volume name of a restore-order key (when no admin client names it)."""
    return f"SP{top:08X}{hi_hi:08X}"


def position_of(hi_lo: int, lo_hi: int, lo_lo: int) -> int:
    """The order on the volume as one signed 64-bit number (the requests' position).

    Monotone in (hi_lo, lo_hi, lo_lo) while hi_lo < 2**15 and lo_hi < 2**16, which holds
    for the section and block numbers a volume has.
    """
    return (min(hi_lo, 0x7FFF) << 48) | (min(lo_hi, 0xFFFF) << 32) | lo_lo


def management_classes(text: str) -> dict[str, str]:
    """``sp.management_classes`` as a map; ConfigError on a malformed entry."""
    found: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        storage_class, sep, mc = entry.rpartition("=")
        if not sep or not storage_class.strip() or not mc.strip():
            raise ConfigError(f"sp.management_classes: {entry!r} is not STORAGECLASS=CLASS")
        found[storage_class.strip()] = mc.strip()
    return found

"""The checksum types of an endit flush request, as the provider writes them.

``neicnordic/dcache-endit-provider`` ``src/main/java/org/ndgf/endit/FlushTask.java`` writes
``checksumType`` as ``checksum.getType().getName().toLowerCase()``, and dCache's
``modules/common/src/main/java/org/dcache/util/ChecksumType.java`` names the types
``ADLER32``, ``MD5``, ``MD4``, ``SHA-1``, ``SHA-256``, ``SHA-512``.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

import pytest

from tssd.endit.protocol import EnditPaths, OutFile, hash_for, inspect_out
from tssd.errors import SourceUnreadable
from tssd.submit import parse_submit

PNFSID = "0000C0FFEE"
DATA = b"bytes on their way to tape" * 1000
PROVIDER_TYPES = {
    "md5": "md5",
    "md4": "md4",
    "sha-1": "sha1",
    "sha-256": "sha256",
    "sha-512": "sha512",
}


def out_file(tmp_path: Path, kind: str, value: str) -> tuple[EnditPaths, dict[str, object]]:
    paths = EnditPaths(tmp_path)
    paths.out.mkdir()
    (paths.out / PNFSID).write_bytes(DATA)
    body = {"file_size": len(DATA), "action": "migrate", "checksumType": kind,
            "checksumValue": value, "storage_class": "atlas:tape@osm"}  # fmt: skip
    return paths, body


def available(name: str) -> bool:
    try:
        hashlib.new(name)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("kind", sorted(PROVIDER_TYPES))
def test_every_type_hashlib_has_is_verified(tmp_path: Path, kind: str) -> None:
    name = PROVIDER_TYPES[kind]
    if not available(name):
        assert hash_for(kind) is None  # accepted unverified, never an error
        pytest.skip(f"this Python's hashlib has no {name}")
    assert hash_for(kind) == name
    right = hashlib.new(name, DATA).hexdigest()
    paths, body = out_file(tmp_path, kind, right.upper())
    found = inspect_out(paths, PNFSID, body)
    assert isinstance(found, OutFile)
    assert found.adler32 == f"{zlib.adler32(DATA):08x}"
    wrong = "0" * len(right)
    refused = inspect_out(paths, PNFSID, {**body, "checksumValue": wrong})
    assert isinstance(refused, SourceUnreadable)
    assert wrong in str(refused)


def test_adler32_is_taken_without_reading(tmp_path: Path) -> None:
    paths, body = out_file(tmp_path, "adler32", f"{zlib.adler32(DATA):x}")
    found = inspect_out(paths, PNFSID, body)
    assert isinstance(found, OutFile)
    assert found.adler32 == f"{zlib.adler32(DATA):08x}"


def test_md4_without_hashlib_support_still_flushes(tmp_path: Path) -> None:
    paths, body = out_file(tmp_path, "md4", "0" * 32)
    found = inspect_out(paths, PNFSID, body)
    if available("md4"):
        assert isinstance(found, SourceUnreadable)
    else:
        assert isinstance(found, OutFile)


def test_untagged_storage_class_is_filed_as_unknown() -> None:
    """``OSMStorageInfo.java``: no tags gives ``<Unknown>:<Unknown>``."""
    body = {"kind": "migrate", "pnfsid": PNFSID, "path": "/pool/data/x", "size": 1,
            "storage_class": "<Unknown>:<Unknown>@osm", "store": "<Unknown>",
            "group": "<Unknown>"}  # fmt: skip
    spec = parse_submit(body)
    assert spec.storage_class == "unknown:unknown@osm"
    assert (spec.store, spec.group) == ("unknown", "unknown")

"""Catalog CSV import and export for the simulated library (docs/api.md, "catalog CSV").

Format: header ``pnfsid,volume,seq,size,storage_class,written_at`` (extra columns are
ignored), one row per copy on tape; a pnfsid with several rows has several copies; ``seq``
is the 1-based file sequence number on its volume, ``size`` in bytes, ``written_at`` ISO
8601 (a time without zone is UTC). Export writes the same columns, ordered by volume and
sequence, ``written_at`` as ``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00``, so an import of an
export (or of a file in that form) exports byte for byte the same.

Import checks every row before it writes anything and reports each bad one as
``line N: reason``; then, in one transaction, it writes the objects (without bytes:
recalls of them produce filler) and brings the cartridges' fill state up to date. Each
object's ``offset``, which drives the locate model, is the sum of the sizes of the lower
sequence numbers on its volume. Object ids (bfids) derive from (pnfsid, volume, seq), so
importing the same file twice changes nothing.

* ``replace=True``: the catalog becomes exactly the file; cartridges not in it are
  emptied back to scratch.
* ``replace=False``: the rows are merged into the catalog. A row whose volume and
  sequence are held by another pnfsid is an error; an object written through the library
  (with real bytes) is kept as it is.

A cartridge's storage class is that of its highest sequence number; cartridges the
library does not have are created with *capacity* bytes (default: the largest capacity
among the library's cartridges, else an LTO-9's).
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tssd.backends.catalog import ByVolume, SimCartridge, SimTables, TapeFill
from tssd.errors import InvalidRequest
from tssd.shim.names import VOLUME, pnfsid_or_none
from tssd.tape.geometry import LTO9

COLUMNS = ("pnfsid", "volume", "seq", "size", "storage_class", "written_at")
#: Errors listed in one message; the rest are counted.
MAX_LISTED = 50
#: Bound parameters per IN list.
CHUNK = 500
_BFID_NAMESPACE = uuid.UUID("6f7e1c9a-3b1d-4b8e-9a57-2d1c0e4f5a60")


class CatalogImportError(InvalidRequest):
    """The CSV has bad rows; nothing was imported. ``errors`` lists ``line N: reason``."""

    def __init__(self, errors: Sequence[str]) -> None:
        shown = list(errors[:MAX_LISTED])
        if len(errors) > MAX_LISTED:
            shown.append(f"... and {len(errors) - MAX_LISTED} more")
        super().__init__("catalog not imported:\n" + "\n".join(shown))
        self.errors = list(errors)


@dataclass(frozen=True, slots=True)
class CatalogRow:
    line: int
    pnfsid: str
    volume: str
    seq: int
    size: int
    storage_class: str | None
    written_at: datetime


def bfid_for(pnfsid: str, volume: str, seq: int) -> str:
    """The object id of an imported copy: the same row always gets the same id."""
    return uuid.uuid5(_BFID_NAMESPACE, f"{pnfsid}/{volume}/{seq}").hex


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


# -- parsing ---------------------------------------------------------------------------


def parse_csv(source: TextIO) -> list[CatalogRow]:
    """Every row of *source*, checked; raises CatalogImportError listing each bad one."""
    reader = csv.DictReader(source)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CatalogImportError([f"line 1: header lacks column(s) {', '.join(missing)}"])
    rows: list[CatalogRow] = []
    errors: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    for record in reader:
        line = reader.line_num
        try:
            row = _parse_row(record, line)
        except ValueError as exc:
            errors.append(f"line {line}: {exc}")
            continue
        first = seen.setdefault((row.volume, row.seq), line)
        if first != line:
            errors.append(f"line {line}: volume {row.volume} seq {row.seq} already on line {first}")
            continue
        rows.append(row)
    if errors:
        raise CatalogImportError(errors)
    return rows


def _parse_row(record: dict[str | Any, str | Any], line: int) -> CatalogRow:
    values = {c: (record.get(c) or "").strip() for c in COLUMNS}
    pnfsid = pnfsid_or_none(values["pnfsid"])
    if pnfsid is None:
        raise ValueError(f"pnfsid {values['pnfsid']!r} is not 1-64 hex digits")
    values["pnfsid"] = pnfsid
    if not VOLUME.fullmatch(values["volume"]):
        raise ValueError(f"volume {values['volume']!r} is not 1-32 of [A-Za-z0-9_.:-]")
    seq = _integer(values["seq"], "seq", 1)
    size = _integer(values["size"], "size", 0)
    try:
        written_at = datetime.fromisoformat(values["written_at"])
    except ValueError:
        raise ValueError(f"written_at {values['written_at']!r} is not ISO 8601") from None
    if written_at.tzinfo is None:
        written_at = written_at.replace(tzinfo=UTC)
    return CatalogRow(
        line=line,
        pnfsid=values["pnfsid"],
        volume=values["volume"],
        seq=seq,
        size=size,
        storage_class=values["storage_class"] or None,
        written_at=written_at,
    )


def _integer(text: str, name: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} {text!r} is not an integer") from None
    if value < lowest:
        raise ValueError(f"{name} {value} is less than {lowest}")
    return value


# -- import ----------------------------------------------------------------------------


async def import_csv(
    tables: SimTables,
    source: str | os.PathLike[str] | TextIO,
    *,
    replace: bool,
    capacity: int | None = None,
) -> dict[str, Any]:
    """Import a catalog CSV (a path or an open text stream); return what was done."""
    rows = await asyncio.to_thread(_read_rows, source)
    by_volume = await asyncio.to_thread(_group, rows)

    async def plan(
        tapes: dict[str, SimCartridge], existing: ByVolume
    ) -> tuple[list[dict[str, Any]], dict[str, TapeFill]]:
        default_capacity = capacity or max((t.capacity for t in tapes.values()), default=0)
        # Plain data in a worker thread: on the event loop, 20,000 rows stalled it 1 s.
        merged, errors = await asyncio.to_thread(_merge, existing, by_volume)
        fills = _fill(merged, tapes, default_capacity or LTO9.capacity_bytes, errors)
        if errors:
            raise CatalogImportError(errors)
        return [obj for volume in merged.values() for obj in volume.values()], fills

    await tables.import_objects(list(by_volume), replace=replace, plan=plan, chunk=CHUNK)
    return {
        "rows": len(rows),
        "volumes": len(by_volume),
        "replace": replace,
        "objects": await tables.count_objects(),
    }


def _read_rows(source: str | os.PathLike[str] | TextIO) -> list[CatalogRow]:
    if isinstance(source, str | os.PathLike):
        with Path(source).open(newline="", encoding="utf-8") as fh:
            return parse_csv(fh)
    return parse_csv(source)


def _group(rows: Iterable[CatalogRow]) -> dict[str, dict[int, CatalogRow]]:
    grouped: dict[str, dict[int, CatalogRow]] = {}
    for row in rows:
        grouped.setdefault(row.volume, {})[row.seq] = row
    return grouped


def _merge(
    existing: dict[str, dict[int, dict[str, Any]]], by_volume: dict[str, dict[int, CatalogRow]]
) -> tuple[dict[str, dict[int, dict[str, Any]]], list[str]]:
    merged: dict[str, dict[int, dict[str, Any]]] = {}
    errors: list[str] = []
    for volume, rows in by_volume.items():
        objects = dict(existing.get(volume, {}))
        for seq, row in rows.items():
            held = objects.get(seq)
            if held is not None and held["pnfsid"] != row.pnfsid:
                errors.append(
                    f"line {row.line}: volume {volume} seq {seq} holds pnfsid {held['pnfsid']}"
                )
            elif held is None or not held["has_data"]:
                objects[seq] = _object(row)
        merged[volume] = objects
    return merged, errors


def _object(row: CatalogRow) -> dict[str, Any]:
    return {
        "bfid": bfid_for(row.pnfsid, row.volume, row.seq),
        "pnfsid": row.pnfsid,
        "volume": row.volume,
        "seq": row.seq,
        "offset": 0,
        "size": row.size,
        "adler32": None,
        "storage_class": row.storage_class,
        "written_at": row.written_at,
        "has_data": False,
    }


def _fill(
    merged: dict[str, dict[int, dict[str, Any]]],
    tapes: dict[str, SimCartridge],
    default_capacity: int,
    errors: list[str],
) -> dict[str, TapeFill]:
    """Set every object's offset; return each volume's fill state, checking capacity."""
    fills: dict[str, TapeFill] = {}
    for volume, objects in merged.items():
        used = 0
        for seq in sorted(objects):
            objects[seq]["offset"] = used
            used += objects[seq]["size"]
        tape = tapes.get(volume)
        capacity = tape.capacity if tape is not None else default_capacity
        if used > capacity:
            errors.append(f"volume {volume}: {used} bytes exceed its capacity of {capacity}")
        last = objects[max(objects)]
        fills[volume] = TapeFill(capacity, used, max(objects) + 1, last["storage_class"])
    return fills


# -- export ----------------------------------------------------------------------------


async def export_csv(tables: SimTables, target: TextIO) -> int:
    """Write every copy as a catalog CSV row, by volume and sequence; return the rows."""
    records = await tables.export_rows()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for pnfsid, volume, seq, size, storage_class, written_at in records:
        writer.writerow((pnfsid, volume, seq, size, storage_class or "", format_time(written_at)))
    target.write(buffer.getvalue())
    return len(records)


async def count_objects(tables: SimTables) -> int:
    return await tables.count_objects()

"""The inputs of a simulation: the request list, and the catalog facts the bound needs."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tssd.backends.sim.catalog_csv import CatalogRow, parse_csv
from tssd.errors import InvalidRequest
from tssd.shim.names import QUEUE, pnfsid_or_none


@dataclass(frozen=True, slots=True)
class Arrival:
    """One line of REQUESTS.csv: a recall that reaches the client at ``at`` seconds."""

    index: int
    pnfsid: str
    at: float
    priority: int = 0
    queue: str = "default"


def load_requests(path: Path) -> list[Arrival]:
    """Parse REQUESTS.csv (``pnfsid,at`` + optional ``priority``, ``queue``), sorted by time."""
    errors: list[str] = []
    arrivals: list[Arrival] = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"pnfsid", "at"} - set(reader.fieldnames or ())
        if missing:
            raise InvalidRequest(f"{path}: header lacks {', '.join(sorted(missing))}")
        for line, record in enumerate(reader, start=2):
            try:
                arrivals.append(_arrival(len(arrivals), record))
            except ValueError as exc:
                errors.append(f"{path}:{line}: {exc}")
    if errors:
        raise InvalidRequest("\n".join(errors[:20]))
    return sorted(arrivals, key=lambda a: (a.at, a.index))


def _arrival(index: int, record: dict[str, str]) -> Arrival:
    raw = (record.get("pnfsid") or "").strip()
    pnfsid = pnfsid_or_none(raw)
    if pnfsid is None:
        raise ValueError(f"pnfsid {raw!r} is not 1-64 hex digits")
    at = float(record.get("at") or "")
    if not at >= 0:
        raise ValueError("at must be a number of seconds >= 0")
    priority = int(record.get("priority") or 0)
    queue = (record.get("queue") or "default").strip()
    if not QUEUE.fullmatch(queue):
        raise ValueError(f"queue {queue!r} is not a valid queue name")
    return Arrival(index, pnfsid, at, priority, queue)


def load_catalog_rows(path: Path) -> list[CatalogRow]:
    with path.open(newline="", encoding="utf-8") as fh:
        return parse_csv(fh)


def copies_by_pnfsid(rows: Sequence[CatalogRow]) -> dict[str, list[CatalogRow]]:
    found: dict[str, list[CatalogRow]] = {}
    for row in rows:
        found.setdefault(row.pnfsid.upper(), []).append(row)
    return found

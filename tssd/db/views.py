"""Rows to domain records (tssd/domain.py): the one place a row becomes a snapshot.

Every store method that hands a request, a drive or a mount to a layer above ``db/``
passes it through here, so nothing above ``db/`` holds an ORM object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

from tssd.domain import Drive, Instance, Kind, Mount, Request, State

#: The record's attributes in its field order (``kind`` and ``state`` among them).
_NAMES = tuple(f.name for f in fields(Request))
_KIND, _STATE = _NAMES.index("kind"), _NAMES.index("state")
_READ = attrgetter(*_NAMES)
_DRIVE = tuple(f.name for f in fields(Drive))
_MOUNT = tuple(f.name for f in fields(Mount))
_INSTANCE = tuple(f.name for f in fields(Instance))


def request_record(row: Any) -> Request:
    """A frozen snapshot of *row*: an ORM ``Request``, or any row or object with its
    attributes (a core row selected with the ORM's attribute names as labels)."""
    record = list(_READ(row))
    record[_KIND] = Kind(record[_KIND])
    record[_STATE] = State(record[_STATE])
    return Request(*record)


def request_records(rows: Iterable[Any]) -> list[Request]:
    return [request_record(row) for row in rows]


def request_of(values: Mapping[str, Any]) -> Request:
    """The record of a row held as a mapping of attribute names (the memory store's)."""
    record = [values[name] for name in _NAMES]
    record[_KIND] = Kind(record[_KIND])
    record[_STATE] = State(record[_STATE])
    return Request(*record)


def columns_reader(attrs: Sequence[str]) -> Callable[[Iterable[Sequence[Any]]], list[Request]]:
    """A maker of records from tuples of the columns whose attributes are *attrs*, in
    that order (a claim's ``RETURNING``): the values taken by position, no lookup by name."""
    order = [attrs.index(name) for name in _NAMES]

    def make(rows: Iterable[Sequence[Any]]) -> list[Request]:
        found = []
        for row in rows:
            values = [row[i] for i in order]
            values[_KIND] = Kind(values[_KIND])
            values[_STATE] = State(values[_STATE])
            found.append(Request(*values))
        return found

    return make


def drive_record(row: Any) -> Drive:
    return Drive(*(getattr(row, name) for name in _DRIVE))


def mount_record(row: Any) -> Mount:
    return Mount(*(getattr(row, name) for name in _MOUNT))


def instance_record(row: Any) -> Instance:
    return Instance(*(getattr(row, name) for name in _INSTANCE))

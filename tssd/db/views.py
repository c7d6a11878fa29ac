"""Rows to domain views (tssd/domain.py): the one place a ``Request`` row becomes a snapshot."""

from __future__ import annotations

from dataclasses import fields

from tssd.db.models import Request
from tssd.domain import Kind, RequestView, State

#: Read as they are; ``kind`` and ``state`` become their enums (the row holds strings).
_FIELDS = tuple(f.name for f in fields(RequestView) if f.name not in ("kind", "state"))


def request_view(row: Request) -> RequestView:
    """A frozen snapshot of *row* (attributes read now, never written back)."""
    fields = {name: getattr(row, name) for name in _FIELDS}
    return RequestView(kind=Kind(row.kind), state=State(row.state), **fields)

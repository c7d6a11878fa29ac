"""Rows to domain views (tssd/domain.py): the one place a ``Request`` row becomes a snapshot."""

from __future__ import annotations

from dataclasses import fields

from tssd.db.models import Request
from tssd.domain import RequestView

_FIELDS = tuple(f.name for f in fields(RequestView))


def request_view(row: Request) -> RequestView:
    """A frozen snapshot of *row* (attributes read now, never written back)."""
    return RequestView(**{name: getattr(row, name) for name in _FIELDS})

"""Time zones are handled in one place: the models' time column type (tssd/db/models.py)."""

from __future__ import annotations

from sqlalchemy import DateTime

from tssd.db.models import Base, UtcDateTime


def test_every_time_column_is_read_back_as_utc() -> None:
    """A new table's ``DateTime`` column would hand SQLite's naive datetimes to every
    reader; ``UtcDateTime`` gives them back aware."""
    naive = [
        f"{table.name}.{column.name}"
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if isinstance(column.type, DateTime) and not isinstance(column.type, UtcDateTime)
    ]
    columns = [c for t in Base.metadata.sorted_tables for c in t.columns]
    assert naive == []
    assert sum(isinstance(c.type, UtcDateTime) for c in columns) >= 14

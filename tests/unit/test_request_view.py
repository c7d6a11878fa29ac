"""A request above the database (tssd/db/views.py): a frozen record whose kind and state
are enums, the same whichever way db/ read the row, and the JSON the API shapes from it
is the same bytes as from the row's strings."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from tssd import domain
from tssd.api.schemas import request_json
from tssd.db import models
from tssd.db.claims import _ATTRS
from tssd.db.models import Request
from tssd.db.views import columns_reader, request_of, request_record
from tssd.domain import Kind, State

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_view_has_its_kind_and_state_as_enums_and_the_same_json() -> None:
    row = Request(
        id=7, kind="recall", state="active", key="00AA", pnfsid="00AA", queue="default",
        priority=0, attempts=1, created_at=T0, updated_at=T0,
    )  # fmt: skip
    view = request_record(row)
    assert view.kind is Kind.RECALL and view.state is State.ACTIVE
    as_strings = dataclasses.replace(view, kind="recall", state="active")  # type: ignore[arg-type]
    assert json.dumps(request_json(view)) == json.dumps(request_json(as_strings))
    assert '"kind": "recall", "state": "active"' in json.dumps(request_json(view))


def test_a_record_is_the_same_from_a_row_its_columns_or_its_values() -> None:
    row = Request(
        id=8, kind="migrate", state="queued", key="00BB", pnfsid="00BB", group="g",
        queue="default", priority=3, attempts=0, created_at=T0, updated_at=T0,
    )  # fmt: skip
    values = {name: getattr(row, name) for name in _ATTRS}
    record = request_record(row)
    assert request_of(values) == record
    assert columns_reader(_ATTRS)([tuple(values[name] for name in _ATTRS)]) == [record]
    assert (record.group, record.kind, record.state) == ("g", Kind.MIGRATE, State.QUEUED)
    assert request_record(record) == record


def test_each_record_has_every_column_of_its_table() -> None:
    """A column added to a table and not to its record would be lost above db/."""
    for record, row in [
        (domain.Request, models.Request),
        (domain.Drive, models.Drive),
        (domain.Mount, models.Mount),
        (domain.Instance, models.Instance),
    ]:
        columns = {attr.key for attr in row.__mapper__.column_attrs}
        assert {f.name for f in dataclasses.fields(record)} == columns, record.__name__

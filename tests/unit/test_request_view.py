"""A request above the database (tssd/db/views.py): its kind and state are enums, and the
JSON the API shapes from it is the same bytes as from the row's strings."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from tssd.api.schemas import request_json
from tssd.db.models import Request
from tssd.db.views import request_view
from tssd.domain import Kind, State

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_view_has_its_kind_and_state_as_enums_and_the_same_json() -> None:
    row = Request(
        id=7, kind="recall", state="active", key="00AA", pnfsid="00AA", queue="default",
        priority=0, attempts=1, created_at=T0, updated_at=T0,
    )  # fmt: skip
    view = request_view(row)
    assert view.kind is Kind.RECALL and view.state is State.ACTIVE
    as_strings = dataclasses.replace(view, kind="recall", state="active")  # type: ignore[arg-type]
    assert json.dumps(request_json(view)) == json.dumps(request_json(as_strings))
    assert '"kind": "recall", "state": "active"' in json.dumps(request_json(view))

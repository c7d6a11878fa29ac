"""WHERE conditions other components hand to the store's queries, built here.

The scheduler restricts its queries by what other components know (the drives of this
instance, the file systems too full for recalls); those components describe the rows to
leave out, this module turns that into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

from sqlalchemy import ColumnElement, not_, or_

from tssd.db.models import Request

#: One condition of a WHERE clause.
Condition: TypeAlias = ColumnElement[bool]


def paths_outside(prefixes: Iterable[str]) -> list[Condition]:
    """Conditions leaving out the requests whose path starts with one of *prefixes*."""
    inside = [Request.path.startswith(prefix, autoescape=True) for prefix in prefixes]
    return [or_(Request.path.is_(None), not_(cond)) for cond in inside]

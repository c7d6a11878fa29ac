"""The statement of one id-ordered page of ``GET /v1/requests`` (``tssctl requests list``).

A page filtered on ``state`` or ``queue`` must be read from the index that starts with
that column and ends with ``id`` (``ix_requests_state_id``, ``ix_requests_state_kind_id``,
``ix_requests_queue_id``): it yields the matches in id order and stops after the page.
With ``state = 'queued'`` PostgreSQL also counts the primary key as id order, and its
statistics say what share of the table is queued but not where: it supposes the queued
rows spread evenly over the ids, walks the primary key and filters, and so reads the
whole history (all older than the queue) before the first queued row: 0.7 s per page at
a million finished requests, ten times that at ten million.

So the page is asked for in that index's order: ordered by its columns, then id, and
bounded as a range of it, ``(state, id) > ('queued', after) AND state <= 'queued'``. A
range, unlike an equality, leaves the column in the order asked for, which only that
index gives without a sort, and it positions the scan at the page's first entry (an
``after`` deep in the queue included): both databases read just the page from the
index, whatever their statistics. The rows and their order are those of ``WHERE state =
'queued' AND id > after ORDER BY id`` (ids are positive: no ``after`` is 0). A page by
``pnfsid`` or ``volume`` has a selective index of its own and is sorted by id after it
(a few rows, or one tape's). The other filters of a page read from such an index are
ranges of one value too (``queue >= 'cms' AND queue <= 'cms'``), checked on the rows the
index yields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, select, tuple_

from tssd.db.models import Request


@dataclass(frozen=True)
class ListFilter:
    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    volume: str | None = None
    pnfsid: str | None = None
    limit: int = 100
    after: int | None = None


#: The filters whose index ends in ``id``, each with the columns it starts with, tried in
#: this order; the first whose columns are all given serves the page.
ORDERED_BY = (("state", "kind"), ("state",), ("queue",))
#: Filters with an index of their own that selects few rows.
SELECTIVE = ("pnfsid", "volume")
FILTERS = ("state", "kind", "queue", "volume", "pnfsid")


def page_statement(flt: ListFilter) -> Select[Request]:
    """``SELECT`` of the requests matching *flt* with an id above ``after``, by id, at
    most ``limit`` (see the module docstring for the form)."""
    given = {name: value for name in FILTERS if (value := getattr(flt, name)) is not None}
    leading = _leading(given)
    conditions: list[Any] = []
    for name in (n for n in given if n not in leading):
        column, value = getattr(Request, name), given[name]
        # The other filters as ranges too: SQLite, with no statistics, takes an equality
        # for a better index than the ordered one and then sorts the matches.
        conditions += [column >= value, column <= value] if leading else [column == value]
    after = flt.after or 0
    if leading:
        columns = [getattr(Request, name) for name in leading]
        values = [given[name] for name in leading]
        upper = (
            columns[0] <= values[0] if len(columns) == 1 else tuple_(*columns) <= tuple_(*values)
        )
        conditions += [tuple_(*columns, Request.id) > tuple_(*values, after), upper]
    elif flt.after is not None:
        conditions.append(Request.id > after)
    order = [getattr(Request, name) for name in leading]
    stmt = select(Request).order_by(*order, Request.id).limit(flt.limit)
    return stmt.where(and_(*conditions)) if conditions else stmt


def _leading(given: dict[str, Any]) -> tuple[str, ...]:
    if any(name in given for name in SELECTIVE):
        return ()
    return next((cols for cols in ORDERED_BY if all(c in given for c in cols)), ())

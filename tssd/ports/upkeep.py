"""The database's own upkeep, as the daemon sees it: told what tssd changed, closed at exit.

:mod:`tssd.db.statistics` keeps the planner statistics of the tables tssd grows or shrinks
itself, and :mod:`tssd.db.counts` recounts the requests in the background; the daemon tells
the one what the retention purge deleted and waits for both at shutdown. Implementations:
:class:`tssd.db.books.SqlUpkeep`, and :class:`tssd.db.books.NoUpkeep` for the memory
store (nothing to analyse, nothing counted in the background).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Upkeep(Protocol):
    """Table statistics kept current, and the background work that keeps them."""

    def changed(self, rows: int, *tables: str) -> None:
        """*rows* rows of each of *tables* were written or deleted (an upkeep may start in
        the background; never blocks, never raises for a table tssd keeps)."""
        ...

    async def close(self) -> None:
        """Wait for (or cancel) the background work under way; idempotent."""
        ...

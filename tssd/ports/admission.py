"""What admission control (:mod:`tssd.api.admission`) reads of the request store."""

from __future__ import annotations

from typing import Protocol


class OpenCount(Protocol):
    """The figure admission compares with ``limits.max_open_requests``."""

    async def count_open(self) -> int:
        """The number of open (queued or active) requests, counted now, never older than
        the caller's own refresh period; with several daemons on one database, all of
        theirs."""
        ...

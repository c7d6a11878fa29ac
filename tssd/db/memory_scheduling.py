"""The scheduler's reads and claims on the in-memory store's rows (:mod:`tssd.db.memory`).

The same selections as :class:`tssd.db.scheduling.Scheduling`, written as filters over
dictionaries; :class:`tssd.ports.scheduling.CandidateReads` and
:class:`tssd.ports.scheduling.SchedulingClaims` state the contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from tssd.db.views import request_of
from tssd.domain import OPEN_STATES, Kind, Request
from tssd.lifecycle import Transition, sources
from tssd.ports.scheduling import PendingRow

Row = dict[str, Any]
Claim = Callable[[Sequence[int], str | None], list[Request]]

#: The states a claim takes requests from (the lifecycle's ``claim``).
_CLAIMABLE = sources(Transition.CLAIM)


class MemoryScheduling:
    """Claims on *rows* (id -> column values); *claim* moves the chosen ids to active."""

    def __init__(self, rows: dict[int, Row], claim: Claim) -> None:
        self._rows = rows
        self._claim = claim

    # -- reads (tssd.db.scheduling.Candidates) ------------------------------------------

    async def recall_volumes(
        self, paused: frozenset[str], held: Sequence[str], *, first: int | None = None
    ) -> list[tuple[str | None, int | None, int]]:
        located = [
            v
            for v in self._queued(Kind.RECALL, paused)
            if v["volume"] is not None and not _under(v["path"], held)
        ]
        if first is not None:
            return [(v["volume"], v["priority"], v["id"]) for v in located[: max(first, 0)]]
        top: dict[str, int] = {}
        oldest: dict[str, int] = {}
        for v in located:  # in id order: a volume's first row is its oldest
            oldest.setdefault(v["volume"], v["id"])
            top[v["volume"]] = max(top.get(v["volume"], v["priority"]), v["priority"])
        return [(volume, top[volume], first_id) for volume, first_id in oldest.items()]

    async def unlocated(self, limit: int) -> list[Request]:
        found = [v for v in self._queued(Kind.RECALL, frozenset()) if v["volume"] is None]
        return [request_of(v) for v in found[: max(limit, 0)]]

    async def volumes_with_recalls(self, candidates: Sequence[str]) -> set[str]:
        wanted = set(candidates)
        return {
            v["volume"]
            for v in self._rows.values()
            if v["kind"] == Kind.RECALL and v["state"] in OPEN_STATES and v["volume"] in wanted
        }

    async def unwritten_migrations(self, paused: frozenset[str], limit: int) -> list[Request]:
        found = [
            v
            for v in self._queued(Kind.MIGRATE, paused)
            if v["checksum"] is not None and v["attempts"] == 0
        ]
        return [request_of(v) for v in found[: max(limit, 0)]]

    async def migration_groups(
        self, paused: frozenset[str]
    ) -> list[tuple[str | None, int, int | None, datetime | None]]:
        groups: dict[str | None, list[Row]] = {}
        for v in self._queued(Kind.MIGRATE, paused):
            groups.setdefault(v["storage_class"], []).append(v)
        return [(name, len(rows), _sum(r["size"] for r in rows),
                 min(r["created_at"] for r in rows)) for name, rows in groups.items()]  # fmt: skip

    async def pending_recalls(self) -> AsyncIterator[PendingRow]:
        located = [v for v in self._queued(Kind.RECALL, frozenset()) if v["volume"] is not None]
        for v in located:
            yield (v["id"], v["volume"], v["position"], v["size"], v["priority"], v["queue"],
                   v["created_at"])  # fmt: skip

    # -- claims ---------------------------------------------------------------------------

    async def claim_recalls(
        self,
        volume: str,
        drive: str,
        limit: int,
        *,
        queues: frozenset[str] | None = None,
        paused: frozenset[str] = frozenset(),
        held: Sequence[str] = (),
        min_priority: int | None = None,
        after: int | None = None,
        by_position: bool = True,
    ) -> list[Request]:
        found = [
            v
            for v in self._queued(Kind.RECALL, paused)
            if v["volume"] == volume
            and (queues is None or v["queue"] in queues)
            and not _under(v["path"], held)
            and (min_priority is None or v["priority"] >= min_priority)
            # SQL: ``position > after`` is never true of a NULL position.
            and (after is None or (v["position"] is not None and v["position"] > after))
        ]
        if by_position:
            # PostgreSQL sorts NULL last; located recalls have a position anyway.
            found.sort(key=lambda v: (v["position"] is None, v["position"] or 0, v["id"]))
        return self._take(found, drive, limit)

    async def claim_migrations(
        self, storage_class: str, drive: str, limit: int, *, paused: frozenset[str] = frozenset()
    ) -> list[Request]:
        found = [
            v for v in self._queued(Kind.MIGRATE, paused) if v["storage_class"] == storage_class
        ]
        found.sort(key=lambda v: (-v["priority"], v["id"]))
        return self._take(found, drive, limit)

    async def claim_removals(self, limit: int) -> list[Request]:
        return self._take(self._queued(Kind.REMOVE, frozenset()), None, limit)

    async def claim_ids(self, ids: Iterable[int], drive: str | None = None) -> list[Request]:
        wanted = set(ids)
        found = [i for i, v in self._rows.items() if i in wanted and v["state"] in _CLAIMABLE]
        return self._claim(found, drive)

    def _queued(self, kind: Kind, paused: frozenset[str]) -> list[Row]:
        """Queued requests of *kind* outside *paused* queues, in id (arrival) order: the
        store adds rows in id order and never removes one."""
        return [
            v
            for v in self._rows.values()
            if v["kind"] == kind and v["state"] in _CLAIMABLE and v["queue"] not in paused
        ]

    def _take(self, found: list[Row], drive: str | None, limit: int) -> list[Request]:
        return self._claim([v["id"] for v in found[: max(limit, 0)]], drive)


def _under(path: str | None, held: Sequence[str]) -> bool:
    """Whether *path* lies in a file system held back (a prefix of *held*)."""
    return path is not None and any(path.startswith(prefix) for prefix in held)


def _sum(sizes: Iterable[int | None]) -> int | None:
    """SQL's SUM: NULLs ignored, NULL when there is nothing to add."""
    known = [n for n in sizes if n is not None]
    return sum(known) if known else None

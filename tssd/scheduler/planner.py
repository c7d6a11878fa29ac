"""The in-memory index of pending recalls, per tape: what choosing the next mount reads.

The database stays the truth (sessions claim from it); this index only answers "which
tapes have how much work" without scanning the requests table. It is loaded from the
database at start and on full resyncs, and kept current in between by the components
that change the queue: intake adds located recalls, sessions take the ones they claim
and give back the ones they did not read, finished/cancelled requests leave through
the notifier. Whatever else changes the table (an operator retry, another instance) is
picked up by the periodic resync (``scheduler.resync_s``).

Per tape it keeps counts, bytes, the oldest arrival, priorities, queues and the number of
runs of consecutive positions (each run after the first costs a locate), all updated in
O(1) per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Entry:
    """One pending recall as the scheduler sees it."""

    id: int
    volume: str
    position: int
    size: int
    priority: int
    queue: str
    #: Clock seconds (``Clock.now``) when the request became pending.
    arrived: float


class TapeQueue:
    """The pending recalls of one tape and their aggregates."""

    __slots__ = ("_by_queue", "_oldest", "_urgent", "bytes", "entries", "positions",
                 "priorities", "queues", "runs", "volume")  # fmt: skip

    def __init__(self, volume: str) -> None:
        self.volume = volume
        self.entries: dict[int, Entry] = {}
        self.positions: dict[int, int] = {}
        self.priorities: dict[int, int] = {}
        self.queues: dict[str, int] = {}
        self.bytes = 0
        self.runs = 0
        self._oldest: float | None = None
        #: Arrival of the oldest request of a priority above 0, None = to recompute.
        self._urgent: float | None = None
        #: Arrival of the oldest request per queue, computed on demand (latency targets).
        self._by_queue: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: Entry) -> None:
        self.entries[entry.id] = entry
        self.bytes += entry.size
        _bump(self.priorities, entry.priority, 1)
        _bump(self.queues, entry.queue, 1)
        pos = entry.position
        if pos not in self.positions:
            # A new position joins or bridges runs of consecutive positions.
            self.runs += 1 - (pos - 1 in self.positions) - (pos + 1 in self.positions)
        _bump(self.positions, pos, 1)
        if self._oldest is not None and entry.arrived < self._oldest:
            self._oldest = entry.arrived
        if entry.priority > 0 and self._urgent is not None and entry.arrived < self._urgent:
            self._urgent = entry.arrived
        known = self._by_queue.get(entry.queue)
        if known is not None and entry.arrived < known:
            self._by_queue[entry.queue] = entry.arrived

    def remove(self, entry_id: int) -> Entry | None:
        entry = self.entries.pop(entry_id, None)
        if entry is None:
            return None
        self.bytes -= entry.size
        _bump(self.priorities, entry.priority, -1)
        _bump(self.queues, entry.queue, -1)
        pos = entry.position
        _bump(self.positions, pos, -1)
        if pos not in self.positions:
            self.runs -= 1 - (pos - 1 in self.positions) - (pos + 1 in self.positions)
        if self._oldest is not None and entry.arrived <= self._oldest:
            self._oldest = None  # recomputed lazily: removals come in batches
        if entry.priority > 0 and self._urgent is not None and entry.arrived <= self._urgent:
            self._urgent = None
        if entry.arrived <= self._by_queue.get(entry.queue, float("-inf")):
            del self._by_queue[entry.queue]
        return entry

    def oldest(self) -> float:
        """Arrival of the request waiting longest (``inf`` when empty)."""
        if self._oldest is None:
            self._oldest = min((e.arrived for e in self.entries.values()), default=float("inf"))
        return self._oldest

    def oldest_in(self, queue: str) -> float:
        """Arrival of the oldest request of *queue* (``inf``: none), cached like
        :meth:`oldest`."""
        if queue not in self.queues:
            return float("inf")
        found = self._by_queue.get(queue)
        if found is None:
            found = min(e.arrived for e in self.entries.values() if e.queue == queue)
            self._by_queue[queue] = found
        return found

    def oldest_above(self, priority: int) -> float:
        """Arrival of the oldest request of a priority above *priority* (``inf``: none).

        Kept for priority 0 like :meth:`oldest`; other floors cost a scan of the tape."""
        if max(self.priorities, default=priority) <= priority:
            return float("inf")
        if priority == 0 and self._urgent is not None:
            return self._urgent
        found = min((e.arrived for e in self.entries.values() if e.priority > priority),
                    default=float("inf"))  # fmt: skip
        if priority == 0:
            self._urgent = found
        return found

    def max_priority(self) -> int:
        return max(self.priorities, default=0)

    def summary(self) -> tuple[object, ...]:
        """Everything the cost model reads of the tape (``cost.evaluate``): equal
        summaries, equal verdicts."""
        return (len(self.entries), self.bytes, self.runs, self.queues, self.priorities,
                self.oldest(), self.oldest_above(0))  # fmt: skip

    def sorted_entries(self) -> list[Entry]:
        """The tape's pending recalls in position order."""
        return sorted(self.entries.values(), key=lambda e: (e.position, e.id))


class Planner:
    """Pending recalls by tape; every operation is O(1) per request except resync."""

    def __init__(self) -> None:
        self.tapes: dict[str, TapeQueue] = {}
        self._where: dict[int, TapeQueue] = {}
        #: Ids taken while a resync's query ran: its snapshot may still hold them.
        self._taken_during_resync: set[int] | None = None
        #: Volumes whose queue changed, and whether the whole index was replaced, since
        #: the ranking last looked (``ranking.py`` scores those tapes again).
        self.changed: set[str] = set()
        self.replaced = False

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._where

    def add(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            if entry.id in self._where:
                self._remove_one(entry.id)
            tape = self.tapes.get(entry.volume)
            if tape is None:
                tape = self.tapes[entry.volume] = TapeQueue(entry.volume)
            tape.add(entry)
            self._where[entry.id] = tape
            self.changed.add(entry.volume)

    def take(self, ids: Iterable[int]) -> list[Entry]:
        """Remove *ids* (claimed, finished or cancelled); return the entries removed."""
        taken = []
        for request_id in ids:
            if self._taken_during_resync is not None:
                self._taken_during_resync.add(request_id)
            entry = self._remove_one(request_id)
            if entry is not None:
                taken.append(entry)
        return taken

    def get(self, request_id: int) -> Entry | None:
        tape = self._where.get(request_id)
        return tape.entries.get(request_id) if tape is not None else None

    def begin_resync(self) -> None:
        """Call before querying the database for :meth:`finish_resync`."""
        self._taken_during_resync = set()

    def finish_resync(self, entries: Iterable[Entry]) -> None:
        """Replace the index by *entries*, keeping known arrival times."""
        taken = self._taken_during_resync or set()
        self._taken_during_resync = None
        known = {i: t.entries[i].arrived for i, t in self._where.items()}
        self.tapes.clear()
        self._where.clear()
        self.replaced = True
        fresh = []
        for entry in entries:
            if entry.id in taken:
                continue
            entry.arrived = known.get(entry.id, entry.arrived)
            fresh.append(entry)
        self.add(fresh)

    def replace(self, fresh: Planner) -> list[TapeQueue]:
        """End a resync with an index built beside this one (``Chooser.resync``, a chunk
        per loop turn), less what was taken meanwhile; the caller kept known arrivals.

        Only the tapes whose aggregates differ count as changed: scoring every tape again
        after each periodic resync cost the decision of that pass tens of milliseconds at
        5,000 tapes (issue 22). Call :meth:`TapeQueue.summary` on *fresh*'s tapes first
        (a chunk per loop turn) so that this compares without walking entries. Returns the
        old tapes, for the caller to release a few per loop turn."""
        taken = self._taken_during_resync or set()
        self._taken_during_resync = None
        for request_id in taken:
            fresh._remove_one(request_id)
        old = self.tapes
        self.changed |= old.keys() ^ fresh.tapes.keys()
        self.changed.update(
            v for v, t in fresh.tapes.items() if v in old and old[v].summary() != t.summary()
        )
        retired = list(old.values())
        self.tapes.clear()
        self.tapes.update(fresh.tapes)
        self._where = fresh._where
        return retired

    def queues(self) -> Iterator[TapeQueue]:
        return iter(self.tapes.values())

    def _remove_one(self, request_id: int) -> Entry | None:
        tape = self._where.pop(request_id, None)
        if tape is None:
            return None
        entry = tape.remove(request_id)
        self.changed.add(tape.volume)
        if not tape.entries:
            del self.tapes[tape.volume]
        return entry


def _bump(counts: dict[Any, int], key: Any, delta: int) -> None:
    n = counts.get(key, 0) + delta
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)

"""The full ranking's order of recall tapes, without scoring every tape on every pass.

A tape's verdict (``cost.evaluate``) is a function of three things: the tape's own queue
(the planner's entries), the time, and the pass's context. The full ranking scores every
tape every pass: at 5,000 tapes that is 25-45 ms of CPU on an idle core, most of the
decision latency at a million pending recalls (issue 22). :class:`Ranking` keeps each
tape's last verdict and scores a tape again only when one of those three can have changed
its verdict:

- its queue: the planner names the tapes it changed (``Planner.changed``; after a
  periodic resync, those whose aggregates differ from the index it replaced);
- the time: each verdict carries the first moment at which a time-dependent term can
  flip (:func:`expires`: the aging bound, the fill wait, the end of an urgent batch, the
  next value band as the age raises the value, the day's mount budget);
- the context: the tapes whose per-volume facts changed (reserved or released, sitting in
  a free drive or no longer, mounted: the budget's ledger) are re-scored every pass, and
  when a fact every tape reads changes (the queue settings, which limited queues have
  room, every free drive asking for cleaning) all of them are.

``mountable`` (health, other instances' claims: ``Scheduler.mountable``) is not cached:
verdicts are scored as if every tape were mountable and the walk skips the tapes that
are not, which gives the same eligible tapes in the same order (``tape_unavailable`` only
ever turns an eligible tape into a held one).

Eligible tapes sit in a heap by their key; a pass pops only as many as it gives drives
(:class:`Walk`) and puts them back. The key of an overdue tape orders by its oldest
arrival instead of ``-age`` (the same order, and constant in time).
``tests/unit/test_ranking.py`` checks the order against the full ranking after random
sequences of changes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass

from tssd.scheduler.context import NO_POLICY, Context
from tssd.scheduler.cost import Verdict, evaluate, service_s, urgent_since
from tssd.scheduler.planner import Planner, TapeQueue

#: A moment is taken as reached this much early: re-scoring a tape early costs nothing,
#: late would give a stale verdict (float rounding of the thresholds).
EARLY_S = 1e-3
HeapKey = tuple[float, ...]


@dataclass(frozen=True)
class Scope:
    """The facts of a pass that every tape's verdict reads: when one changes, every tape
    is scored again."""

    queues: tuple[tuple[str, object], ...]
    #: Queues with a drive limit that have room below it.
    room: frozenset[str]
    #: Every free drive asked for cleaning (``drive_cleaning_due`` holds every mount).
    cleaning: bool


def scope_of(ctx: Context) -> Scope:
    room = frozenset(
        name
        for name, q in ctx.queues.items()
        if q.max_drives is not None and ctx.queue_drives.get(name, 0) < q.max_drives
    )
    cleaning = bool(ctx.free) and all(d.cleaning_due for d in ctx.free)
    return Scope(tuple(sorted(ctx.queues.items())), room, cleaning)


def exact_for(ctx: Context) -> bool:
    """Whether the incremental ranking gives the full one's order under *ctx*: not with
    latency targets (a tape's verdict then reads every other tape's planned start)."""
    return not ctx.targets and ctx.settings.max_wait_s > 0


def expires(
    tape: TapeQueue, ctx: Context, verdict: Verdict, budget_free: Callable[[str], float]
) -> float:
    """The first moment at which *verdict* may no longer be what ``evaluate`` says
    (``inf``: not before the tape or the context changes); *budget_free*: when a volume's
    mount budget lets it be mounted again (``MountLedger.free_at``)."""
    s, now = ctx.settings, ctx.now
    oldest = tape.oldest()
    moments = []
    if now - oldest < s.max_wait_s:
        moments.append(oldest + s.max_wait_s)  # overdue
        if s.age_weight > 0 and tape.bytes > 0 and not verdict.rule:
            moments.append(_next_band(tape, ctx, oldest))
    fill = min(s.fill_wait_s, s.max_wait_s)
    if now - oldest < fill:
        moments.append(oldest + fill)
    if tape.max_priority() > 0 or any(ctx.queues.get(q, NO_POLICY).priority for q in tape.queues):
        batch_end = urgent_since(tape) + s.urgent_batch_s
        if now < batch_end:
            moments.append(batch_end)
    if verdict.rule == "mount_budget":
        moments.append(budget_free(tape.volume))
    return min(moments, default=math.inf) - EARLY_S


def _next_band(tape: TapeQueue, ctx: Context, oldest: float) -> float:
    """When the age raises the tape's value into the next 10 % band (cost.evaluate)."""
    s = ctx.settings
    total, _ = service_s(tape, ctx.profile, mounted=tape.volume in ctx.mounted)
    total = max(total, 1e-9)
    age = max(0.0, ctx.now - oldest)
    value = tape.bytes * (1.0 + s.age_weight * min(1.0, age / max(s.max_wait_s, 1e-9)))
    band = math.floor(math.log(max(value / total, 1.0), 1.1))
    needed = 1.1 ** (band + 1) * total / tape.bytes  # value / bytes at the next band
    return oldest + max(s.max_wait_s, 1e-9) * (needed - 1.0) / s.age_weight


def heap_key(verdict: Verdict, tape: TapeQueue) -> HeapKey:
    key = verdict.key
    if key[0] == 0.0:  # overdue: by -age, i.e. by the oldest arrival
        return (0.0, tape.oldest(), *key[2:])
    return key


class Ranking:
    """Every tape's last verdict, the eligible ones in a heap by key (module docstring)."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.verdicts: dict[str, Verdict] = {}
        self.keys: dict[str, HeapKey] = {}
        #: Eligible tapes with a priority above 0: the pass's urgent waiting list.
        self.urgent: set[str] = set()
        self._heap: list[tuple[HeapKey, str, int]] = []
        self._version: dict[str, int] = {}
        self._expiry: list[tuple[float, str, int]] = []
        self._scope: Scope | None = None
        self._mounted: frozenset[str] = frozenset()
        self._busy: frozenset[str] = frozenset()
        self._now = -math.inf
        self._serial = 0
        #: Tapes scored by the last refresh (benchmarks, tests).
        self.scored = 0

    def invalidate(self) -> None:
        """Score every tape again at the next refresh."""
        self._scope = None

    def refresh(
        self, ctx: Context, busy: Set[str], touched: Set[str],
        budget_free: Callable[[str], float],
    ) -> None:  # fmt: skip
        """Score again the tapes whose verdict may have changed since the last refresh;
        *touched*: volumes whose per-volume facts changed (reserved, released, mounted).
        *ctx* is the pass's, with every volume mountable (module docstring)."""
        scope = scope_of(ctx)
        changed = self.planner.changed
        self.planner.changed = set()
        everything = self.planner.replaced or scope != self._scope or ctx.now < self._now
        self.planner.replaced = False
        busy = frozenset(busy)
        if everything:
            todo: Set[str] = set(self.planner.tapes) | set(self.verdicts)
        else:
            todo = changed | set(touched) | (ctx.mounted ^ self._mounted) | (busy ^ self._busy)
            todo |= ctx.mounted | self._expired(ctx.now)
        self._scope, self._mounted, self._busy, self._now = scope, ctx.mounted, busy, ctx.now
        for volume in todo:
            self._score(volume, ctx, budget_free)
        self.scored = len(todo)
        if len(self._heap) > 2 * len(self.keys) + 1024:
            self._compact()

    def _expired(self, now: float) -> set[str]:
        due = set()
        while self._expiry and self._expiry[0][0] <= now:
            _, volume, version = heapq.heappop(self._expiry)
            if self._version.get(volume) == version:
                due.add(volume)
        return due

    def _score(self, volume: str, ctx: Context, budget_free: Callable[[str], float]) -> None:
        self._serial += 1
        version = self._version[volume] = self._serial
        self.keys.pop(volume, None)
        self.urgent.discard(volume)
        tape = self.planner.tapes.get(volume)
        if tape is None or not tape.entries:
            self.verdicts.pop(volume, None)
            del self._version[volume]
            return
        verdict = self.verdicts[volume] = evaluate(tape, ctx)
        when = expires(tape, ctx, verdict, budget_free)
        if when < math.inf:
            heapq.heappush(self._expiry, (when, volume, version))
        if verdict.rule:
            return
        key = self.keys[volume] = heap_key(verdict, tape)
        heapq.heappush(self._heap, (key, volume, version))
        if verdict.priority > 0:
            self.urgent.add(volume)

    def _compact(self) -> None:
        self._heap = [(k, v, self._version[v]) for v, k in self.keys.items()]
        heapq.heapify(self._heap)
        self._expiry = [e for e in self._expiry if self._version.get(e[1]) == e[2]]
        heapq.heapify(self._expiry)

    def walk(self, busy: Set[str], mountable: Callable[[str], bool]) -> Walk:
        """The eligible tapes best first, popped one by one: close the walk to put
        them back."""
        return Walk(self, busy, mountable)

    def ordered(self, busy: Set[str], mountable: Callable[[str], bool]) -> list[Verdict]:
        """Every eligible tape, best first (the full order: planned starts, tests)."""
        return [
            self.verdicts[v]
            for v in sorted(self.keys, key=self.keys.__getitem__)
            if v not in busy and mountable(v)
        ]

    def urgent_after(
        self, seen: Set[str], busy: Set[str], mountable: Callable[[str], bool]
    ) -> list[Verdict]:
        """The eligible tapes of priority above 0 a walk did not reach, best first."""
        rest = [v for v in self.urgent if v not in seen and v not in busy and mountable(v)]
        return [self.verdicts[v] for v in sorted(rest, key=self.keys.__getitem__)]


class Walk:
    """Eligible tapes in key order, popped from the heap as they are asked for."""

    def __init__(self, ranking: Ranking, busy: Set[str], mountable: Callable[[str], bool]):
        self.ranking, self.busy, self.mountable = ranking, frozenset(busy), mountable
        self._popped: list[tuple[HeapKey, str, int]] = []

    def __iter__(self) -> Iterator[Verdict]:
        heap, version = self.ranking._heap, self.ranking._version
        while heap:
            entry = heapq.heappop(heap)
            if version.get(entry[1]) != entry[2]:
                continue  # scored again since: a newer entry (or none) stands for it
            self._popped.append(entry)
            if entry[1] in self.busy or not self.mountable(entry[1]):
                continue
            yield self.ranking.verdicts[entry[1]]

    def close(self) -> None:
        for entry in self._popped:
            heapq.heappush(self.ranking._heap, entry)
        self._popped = []


def mounted_eligible(ranking: Ranking, ctx: Context, busy: Set[str],
                     mountable: Callable[[str], bool]) -> int:  # fmt: skip
    """Eligible tapes that sit in a free drive (no mount): where migrations go in line."""
    return sum(
        1
        for v in ctx.mounted
        if v in ranking.keys and v not in busy and mountable(v)
        and not ranking.verdicts[v].mount_s
    )  # fmt: skip

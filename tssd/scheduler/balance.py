"""Ending the drives together after staggered bulk sessions (issue 18 point 4).

Staggering (``stagger.py``) spreads the drives' free times over a session, and at the
campaign's end that spread becomes the spread of the drives' ends: a drive freeing late
takes a whole tape and ends up to a session after the first drive ran out of work. A tape
cannot be read faster than one drive reads it, but a drive freeing early can read part of
the tape a later drive would take (McNaughton's wrap-around rule for machines free at
different times): two drives free at 0 s and 5,000 s with two tapes of 10,000 s end at
10,000 s and 15,000 s taken whole; if the first reads 2,500 s of the second tape and then
the first tape whole, and the second drive reads the second tape's rest, both end at
12,500 s.

So, near the end (less work queued than the longest queued session per drive, where
staggering stops), a drive freeing up while a queue has a latency target plans the queue:
the queued sessions in their rank order go to the drives as they free up (list
scheduling). For each queued tape whose planned end lies more than *margin* (two mount
cycles: the pre-read costs one) past the balanced end (the remaining work spread evenly
over the drives), reading that excess first is tried: the pre-read must be done before
the later drive would take the tape, whose rest keeps its place in the queue. The
pre-read that lowers the drives' summed overshoot of the balanced end most, by at least
*margin* and without a later last end, is read; none, and the drive takes the queue as
usual. The plan is the cost model's, so its estimates' error (sessions overrun them by
6-7 %, docs/benchmarks.md) is the limit of what this can balance.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence


def list_schedule(
    free: Sequence[float], queued: Sequence[float], released: Sequence[float] = ()
) -> tuple[list[tuple[float, float]], list[float]]:
    """(start, end) of each of *queued* (session seconds, in the order the drives take
    them) given to the drive free first (drives free at *free*), and when each drive ends;
    a session cannot start before its *released* moment (default: any time)."""
    heap = list(free)
    heapq.heapify(heap)
    plan = []
    for i, seconds in enumerate(queued):
        start = max(heap[0], released[i] if i < len(released) else -math.inf)
        heapq.heapreplace(heap, start + seconds)
        plan.append((start, start + seconds))
    return plan, heap


def overshoot(ends: Sequence[float], balanced: float) -> float:
    """How far past the balanced end the drives end, summed."""
    return sum(max(0.0, end - balanced) for end in ends)


def pre_read(
    now: float, others: Sequence[float], queued: Sequence[float], drives: int, margin: float
) -> tuple[int, float] | None:
    """What a drive freeing *now* should read first: (index into *queued*, seconds of
    reading), or ``None`` (take the queue's first tape as usual). *others*: the planned
    ends of the other drives' sessions (a drive not listed is free now); *queued*: the
    sessions waiting (each including its mount cycle), in rank order; *margin*: two mount
    cycles."""
    if not queued or drives < 2:
        return None
    free = [now, *(max(now, end) for end in others)]
    free += [now] * max(0, drives - len(free))
    plan, ends = list_schedule(free, queued)
    balanced = now + (sum(f - now for f in free) + sum(queued)) / drives
    before = overshoot(ends, balanced)
    cycle = margin / 2
    best: tuple[float, int, float] | None = None
    for i, (start, end) in enumerate(plan):
        # Read first what would end that tape's session past the balanced end; its rest
        # keeps its place in the queue and cannot start before the pre-read is done.
        seconds = end - balanced
        done = now + cycle + seconds
        if seconds <= margin or start < done or queued[i] - seconds <= margin:
            continue
        rest = [*queued]
        rest[i] -= seconds
        released = [done if j == i else -math.inf for j in range(len(rest))]
        _, after = list_schedule([done, *free[1:]], rest, released)
        gain = before - overshoot(after, balanced)
        if gain >= margin and max(after) <= max(ends) and (best is None or gain > best[0]):
            best = (gain, i, seconds)
    return None if best is None else (best[1], best[2])

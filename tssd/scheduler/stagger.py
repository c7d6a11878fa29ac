"""Staggered bulk sessions while a queue has a latency target (issue 18 point 4).

Alike tapes started together end together: on a campaign of many alike bulk tapes every
drive starts a session at once, no drive frees up for a whole session and then all free
up at once, and a target-bearing request on a tape not in a drive meanwhile waits or makes
a session yield (a preemption: the visit's mount cycle and the yielding tape's remount).
With the drives' free times spread over a session, the next drive to free up comes soon:
it mounts an unread tape of urgent requests and reads it through (no extra mount), and a
visit to a tape already read fits between two sessions without a preemption.

So a bulk session starting while a target is configured ends early, once, when its
planned end falls within a quarter of a spacing of another running session's (the
spacing: its own estimated length over the enabled drives): it stops at the latest moment
a spacing away from every other planned end. (Half a spacing split more tapes and cost
lto9 bulk 1,000 s more on the trickle campaign: docs/benchmarks.md.) The rest of its
tape is an ordinary tape with less work (it costs one more mount cycle). Near the
campaign's end (less queued work than a session per drive) nothing is split: the drives
should then end together.
"""

from __future__ import annotations

from collections.abc import Iterable


def stagger_end(now: float, service_s: float, others: Iterable[float], drives: int) -> float | None:
    """When a session starting *now* for *service_s* seconds should stop, so that its
    end is a spacing (*service_s* / *drives*) away from each of the *others* (the planned
    ends of the running sessions); ``None``: run it through (no collision, or no moment
    at least a spacing after *now* fits)."""
    if drives < 2 or service_s <= 0:
        return None
    gap = service_s / drives
    ends = sorted(others)
    end = now + service_s

    def clear(t: float) -> bool:
        return all(abs(t - x) >= gap * (1 - 1e-9) for x in ends)

    if all(abs(end - x) >= gap / 4 for x in ends):
        return None
    for t in sorted((x - gap for x in ends if x - gap < end), reverse=True):
        if t < now + gap:
            break
        if clear(t):
            return t
    return None

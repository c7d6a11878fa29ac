"""Copy choice as a greedy set cover: the fewest tapes that serve the whole pending set.

A file with one copy fixes its tape. The others take a copy on a tape already needed
(mounted, with work queued, or fixed by another file of the batch) when they have one;
what is left is covered greedily, the tape covering most of the remaining files first
(ties: the oldest copy, as later copies are often scattered re-writes). Greedy set cover
is within a logarithmic factor of the optimum and exact in the common cases (originals
on a few tapes, re-writes scattered).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from tssd.backends.base import TapeCopy


def cover_copies(wanted: Sequence[Sequence[TapeCopy]], needed: set[str]) -> list[TapeCopy | None]:
    """For each file's copies, the copy to read (None when the file has none)."""
    chosen: list[TapeCopy | None] = [None] * len(wanted)
    tapes = set(needed)
    for i, copies in enumerate(wanted):
        if len({c.volume for c in copies}) == 1:
            chosen[i] = min(copies, key=_age)
            tapes.add(copies[0].volume)
    open_ = [i for i, copies in enumerate(wanted) if copies and chosen[i] is None]
    while open_:
        rest = []
        for i in open_:
            on_needed = [c for c in wanted[i] if c.volume in tapes]
            if on_needed:
                chosen[i] = min(on_needed, key=_age)
            else:
                rest.append(i)
        if not rest:
            break
        cover: Counter[str] = Counter()
        first: dict[str, datetime] = {}
        for i in rest:
            for volume in {c.volume for c in wanted[i]}:
                cover[volume] += 1
            for c in wanted[i]:
                first[c.volume] = min(c.written_at, first.get(c.volume, c.written_at))
        best = max(cover, key=lambda v: (cover[v], -first[v].timestamp(), v))
        tapes.add(best)
        open_ = rest
    return chosen


def _age(copy: TapeCopy) -> tuple[datetime, str, int]:
    return (copy.written_at, copy.volume, copy.position)

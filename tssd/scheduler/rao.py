"""Software Recommended Access Order: the order of the reads of one mounted batch.

Position order never turns the head round, but on a serpentine medium it is not the
cheapest order, dense or sparse: it skips the unrequested files of a wrap one locate
at a time (fixed part plus travel), while the start of a requested run on the
neighbouring wrap often lies right beside the head (the start of wrap 1 sits at the end
of wrap 0, and so on along the whole length). RAO here is a nearest-next tour on the
profile's locate model over *runs* (files that follow each other on tape, read with no
locate between them and so entered only at their first file), starting at the drive's
head. ``auto`` keeps whichever of the two orders the model finds cheaper, rewind
included, and keeps position order on backends without a timing model (real drives:
their geometry is not known, and their own RAO, where they have one, knows better).

Higher-priority files of a batch (``urgent``) are not simply read first: each joins the
order at the place where it adds the least locating, among the places the order reaches
by the file's deadline (``urgent_target_s`` after it arrived, and at least
``urgent_within_s`` from now). The tour works its way along the tape slowly, crossing
wraps at about the same point, so it comes near a file far down the tape only late;
reading that file first costs a long locate there and, for the rest of the tour, a long
way back (about 50 s on LTO-9), where a deadline some thousand seconds away lets it
join the tour as it passes (about 8 s).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tssd.backends.base import ReadItem
from tssd.scheduler.drives import DriveState
from tssd.tape.geometry import LTO9, Profile

#: Above this many files a batch keeps position order: the tour costs about
#: runs x wraps model evaluations, and a batch this large is one whole tape anyway.
RAO_MAX_BATCH = 20_000

#: Batches larger than this are ordered off the event loop (a tour of 1,000 files on a
#: full LTO-9 cartridge takes up to 0.4 s of CPU).
OFFLOAD_ABOVE = 100


@dataclass(frozen=True, slots=True)
class _Run:
    """Items ``first`` to ``stop - 1`` (in position order), contiguous on tape."""

    first: int
    stop: int
    start: int
    end: int


def _runs(spans: Sequence[tuple[int, int]]) -> list[_Run]:
    """Contiguous runs of *spans* (offset, size), which are in position order."""
    runs: list[_Run] = []
    first, start, end = 0, -1, -1
    for i, (offset, size) in enumerate(spans):
        if offset != end:
            if i:
                runs.append(_Run(first, i, start, end))
            first, start = i, offset
        end = offset + size
    if spans:
        runs.append(_Run(first, len(spans), start, end))
    return runs


def order_cost(spans: Sequence[tuple[int, int]], head: int, profile: Profile) -> float:
    """Model seconds of locating to read *spans* in the given order, and rewinding after
    (where the rewind depends on where the order ends: not with published steps)."""
    if profile.rewind_steps_s:
        return locate_total(spans, head, profile)
    return locate_total(spans, head, profile) + profile.rewind_s(
        spans[-1][0] + spans[-1][1] if spans else head, profile.capacity_bytes
    )


def locate_total(offsets: Sequence[tuple[int, int]], head: int, profile: Profile) -> float:
    """Model seconds of locating to read (offset, size) pairs in the given order."""
    total = 0.0
    capacity = profile.capacity_bytes
    for offset, size in offsets:
        total += profile.locate_s(head, offset, capacity)
        head = offset + size
    return total


class _Starts:
    """The start offsets of the runs not read yet, sorted along the tape by wrap and by
    band: the cheapest locate from the head is found in O(bands x log runs)."""

    def __init__(self, runs: Sequence[_Run], profile: Profile) -> None:
        self.profile, self.capacity = profile, profile.capacity_bytes
        self.where: dict[int, tuple[float, int, int]] = {}  # run -> (x, wrap, band)
        self.wraps: dict[int, list[tuple[float, int]]] = defaultdict(list)
        self.bands: dict[int, list[tuple[float, int, int]]] = defaultdict(list)
        for index, run in enumerate(runs):
            x = profile.longitudinal(run.start, self.capacity)
            wrap = profile.wrap_of(run.start, self.capacity)
            band = profile.band_of(run.start, self.capacity)
            self.where[index] = (x, wrap, band)
            self.wraps[wrap].append((x, index))
            self.bands[band].append((x, index, wrap))
        for cell in self.wraps.values():
            cell.sort()
        for lane in self.bands.values():
            lane.sort()

    def nearest(self, head: int, runs: Sequence[_Run]) -> int:
        """The run whose start is the cheapest locate away (the lowest index on a tie).

        A locate costs a fixed part, the longitudinal travel, and a change cost that is
        the same for every run of the head's wrap, of the other wraps of its band, and of
        each other band: within each of those classes the run nearest along the tape is
        the cheapest, so only those few are costed.
        """
        p, cap = self.profile, self.capacity
        x = p.longitudinal(head, cap)
        own_wrap, own_band = p.wrap_of(head, cap), p.band_of(head, cap)
        candidates: list[int] = []
        cell = self.wraps.get(own_wrap, [])
        i = bisect_left(cell, (x, -1))
        candidates += [cell[j][1] for j in (i - 1, i) if 0 <= j < len(cell)]
        for band, lane in self.bands.items():
            i = bisect_left(lane, (x, -1, -1))
            skip = own_wrap if band == own_band else None
            candidates += _either_side(lane, i, skip)
        assert candidates, "nearest() on an empty set"
        return min((p.locate_s(head, runs[c].start, cap), c) for c in candidates)[1]

    def remove(self, index: int) -> None:
        x, wrap, band = self.where.pop(index)
        cell, lane = self.wraps[wrap], self.bands[band]
        del cell[bisect_left(cell, (x, index))]
        del lane[bisect_left(lane, (x, index, wrap))]
        if not cell:
            del self.wraps[wrap]
        if not lane:
            del self.bands[band]


def _either_side(lane: Sequence[tuple[float, int, int]], at: int, skip: int | None) -> list[int]:
    """The runs of *lane* nearest either side of position *at*, not on wrap *skip*."""
    found = []
    for step, start in ((-1, at - 1), (1, at)):
        j = start
        while 0 <= j < len(lane) and lane[j][2] == skip:
            j += step
        if 0 <= j < len(lane):
            found.append(lane[j][1])
    return found


def rao_order(offsets: Sequence[tuple[int, int]], head: int, profile: Profile) -> list[int]:
    """Indexes of *offsets* (in position order) in nearest-next-run order from *head*."""
    runs = _runs(offsets)
    starts = _Starts(runs, profile)
    order: list[int] = []
    for _ in range(len(runs)):
        index = starts.nearest(head, runs)
        starts.remove(index)
        run = runs[index]
        order.extend(range(run.first, run.stop))
        head = run.end
    return order


def insert_early(
    order: Sequence[int],
    urgent: Mapping[int, float],
    spans: Sequence[tuple[int, int]],
    head: int,
    profile: Profile,
) -> list[int]:
    """*order* (indexes of *spans*) with each index of *urgent* inserted at the place where
    it adds the least locating, among the places reached within its *urgent* value of
    model seconds of reading from *head*; the first place is always allowed."""
    out = list(order)
    cap = profile.capacity_bytes
    for u in sorted(urgent, key=lambda i: (urgent[i], spans[i][0])):
        start, size = spans[u]
        within_s = urgent[u]
        best_delta, best_slot = math.inf, 0
        at, elapsed = head, 0.0
        for slot in range(len(out) + 1):
            into = profile.locate_s(at, start, cap)
            if slot == len(out):
                if into < best_delta:
                    best_slot = slot
                break
            nxt, nxt_size = spans[out[slot]]
            skip = profile.locate_s(at, nxt, cap)
            delta = into + profile.locate_s(start + size, nxt, cap) - skip
            if delta < best_delta:
                best_delta, best_slot = delta, slot
            elapsed += skip + profile.per_file_s + profile.transfer_s(nxt_size)
            at = nxt + nxt_size
            if elapsed > within_s:
                break
        out.insert(best_slot, u)
    return out


def spread_factors(profile: Profile) -> tuple[float, ...]:
    """Scale factors of the estimated positions that RAO's choice must hold over."""
    s = profile.position_spread
    return (1.0,) if s <= 0 else (1.0 - s, 1.0 - s / 2, 1.0, 1.0 + s / 2, 1.0 + s)


def _scaled(spans: Sequence[tuple[int, int]], factor: float) -> list[tuple[int, int]]:
    """*spans* (offset, size) with their offsets scaled by *factor*; each span's end is
    scaled too, so objects that follow each other on tape still do (no locate between)."""
    if factor == 1.0:
        return list(spans)
    out = []
    for offset, size in spans:
        start = int(offset * factor)
        out.append((start, int((offset + size) * factor) - start))
    return out


def robust_tour(
    spans: Sequence[tuple[int, int]], head: int, profile: Profile, factors: Sequence[float]
) -> list[int]:
    """Indexes of *spans* (in position order) in nearest-next-run order from *head*, each
    hop the least locating on average over the positions scaled by each of *factors*.

    With one factor this is :func:`rao_order` on the scaled positions. With several, a
    hop to a wrap far from the head, whose place the factors disagree on, loses to a
    nearer one they agree on: the tour leans on what is known and leaves the rest for
    when the tape's calibration (``calibrate.py``) has narrowed the factors.
    """
    runs = _runs(spans)
    views = [[_scaled_run(run, f) for run in runs] for f in factors]
    starts = [_Starts(view, profile) for view in views]
    heads = [int(head * f) for f in factors]
    capacity = profile.capacity_bytes
    order: list[int] = []
    for _ in range(len(runs)):
        candidates = {s.nearest(h, v) for s, v, h in zip(starts, views, heads, strict=True)}
        pairs = list(zip(views, heads, strict=True))
        _, index = min(
            (sum(profile.locate_s(h, v[c].start, capacity) for v, h in pairs), c)
            for c in candidates
        )
        for s in starts:
            s.remove(index)
        run = runs[index]
        order.extend(range(run.first, run.stop))
        heads = [view[index].end for view in views]
    return order


def _scaled_run(run: _Run, factor: float) -> _Run:
    return _Run(run.first, run.stop, int(run.start * factor), int(run.end * factor))


def _robust_order(
    late: list[int],
    offsets: Sequence[tuple[int, int]],
    head: int,
    profile: Profile,
    factors: Sequence[float] | None = None,
) -> list[int]:
    """The tour over *factors* (default: the profile's spread), if it beats position
    order by 1 % on average over them, else position order.

    Where positions are estimates, a tour that leans on a neighbouring wrap lying right
    beside the head may find it a wrap away on the real tape; position order moves
    forward along the tape and barely depends on the estimate.
    """
    spans = [offsets[i] for i in late]
    factors = tuple(factors) if factors else spread_factors(profile)
    views = [(f, _scaled(spans, f)) for f in factors]

    def mean_cost(order: Sequence[int]) -> float:
        total = sum(order_cost([v[i] for i in order], int(head * f), profile) for f, v in views)
        return total / len(views)

    tour = robust_tour(spans, head, profile, factors)
    if mean_cost(tour) < 0.99 * mean_cost(range(len(late))):
        return [late[i] for i in tour]
    return late


def inserts_urgent(profile: Profile | None, mode: str) -> bool:
    """Whether :func:`order_reads` places higher-priority files itself (else: read them
    in a pass of their own first)."""
    return mode != "off" and profile is not None


def order_reads(
    items: Sequence[ReadItem],
    drive: DriveState,
    profile: Profile | None,
    mode: str,
    *,
    urgent: Mapping[int, float] | None = None,
    factors: Sequence[float] | None = None,
    tour: bool = True,
) -> list[ReadItem]:
    """*items* (in position order) reordered by RAO when *mode* asks for it and it pays.

    *profile* is the backend's timing model, None when it has none: ``auto`` then keeps
    position order and ``on`` falls back to the LTO-9 model. Items whose ``id()`` is a key
    of *urgent* join the order within that many seconds (:func:`insert_early`) when
    :func:`inserts_urgent`. *factors*: the scales of the estimated positions still
    plausible (``calibrate.Calibration.factors``); ``auto`` plans over them. *tour* False
    (the estimate is not to be planned on, ``Calibration.beyond``): ``auto`` keeps
    position order, the higher-priority files still placed early.
    """
    if mode == "off" or len(items) < 2:
        return list(items)
    if urgent is None or not inserts_urgent(profile, mode):
        urgent = {}
    if profile is None:
        if mode == "auto":
            return list(items)
        profile = LTO9
    if mode == "auto" and len(items) > RAO_MAX_BATCH:
        return list(items)
    items = sorted(items, key=lambda i: i.copy.offset)
    offsets = [(i.copy.offset, i.copy.size) for i in items]
    late = [i for i, item in enumerate(items) if id(item) not in urgent]
    early = [i for i, item in enumerate(items) if id(item) in urgent]
    if not late:  # all of one priority: nothing to put before the rest
        late, early = early, []
    if mode == "auto" and not tour:
        order = late
    elif mode == "auto":
        order = _robust_order(late, offsets, drive.head_offset, profile, factors)
    else:
        order = [late[i] for i in rao_order([offsets[i] for i in late], drive.head_offset, profile)]
    if early:
        within = {i: urgent[id(items[i])] for i in early}
        order = insert_early(order, within, offsets, drive.head_offset, profile)
    return [items[i] for i in order]

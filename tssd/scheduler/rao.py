"""Software Recommended Access Order: the order of the reads of one mounted batch.

Position order is the natural order of a tape and the cheapest for dense reads. For
sparse reads on a serpentine medium it is not: the start of wrap 1 sits at the end of
the tape, next to the end of wrap 0, so two files far apart in sequence may be close.
RAO here is a greedy nearest-next-file tour on the profile's locate model, starting at
the drive's head; ``auto`` keeps whichever of the two orders the model finds cheaper.
"""

from __future__ import annotations

from collections.abc import Sequence

from tssd.backends.base import ReadItem
from tssd.backends.sim.profiles import Profile
from tssd.scheduler.drives import DriveState

#: Above this many files a batch is dense enough for position order (and the greedy
#: tour, quadratic in the batch, would cost more CPU than it saves tape time).
RAO_MAX_BATCH = 300


def locate_total(offsets: Sequence[tuple[int, int]], head: int, profile: Profile) -> float:
    """Model seconds of locating to read (offset, size) pairs in the given order."""
    total = 0.0
    capacity = profile.capacity_bytes
    for offset, size in offsets:
        total += profile.locate_s(head, offset, capacity)
        head = offset + size
    return total


def rao_order(offsets: Sequence[tuple[int, int]], head: int, profile: Profile) -> list[int]:
    """Indexes of *offsets* in greedy nearest-next order from *head*."""
    capacity = profile.capacity_bytes
    left = set(range(len(offsets)))
    order = []
    while left:
        best = min(left, key=lambda i: (profile.locate_s(head, offsets[i][0], capacity), i))
        order.append(best)
        left.discard(best)
        head = offsets[best][0] + offsets[best][1]
    return order


def order_reads(
    items: Sequence[ReadItem], drive: DriveState, profile: Profile, mode: str
) -> list[ReadItem]:
    """*items* (in position order) reordered by RAO when *mode* asks for it and it pays."""
    if mode == "off" or len(items) < 3 or (mode == "auto" and len(items) > RAO_MAX_BATCH):
        return list(items)
    offsets = [(i.copy.offset, i.copy.size) for i in items]
    order = rao_order(offsets, drive.head_offset, profile)
    if mode == "auto":
        rao_s = locate_total([offsets[i] for i in order], drive.head_offset, profile)
        if rao_s >= 0.99 * locate_total(offsets, drive.head_offset, profile):
            return list(items)
    return [items[i] for i in order]

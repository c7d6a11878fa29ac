"""A lower bound on the makespan of a recall campaign: no schedule can finish sooner.

Each term counts only work that every schedule must do, with the cheapest possible
cost, so the maximum of the terms is still a bound (derivation in docs/benchmarks.md):

1. Arrival: no request finishes before it arrives, and the first request for a file not
   before ``at + per_file + transfer`` (a later one may join it while it is open).
2. Drive work: every requested file costs ``per_file + transfer`` on some drive (once,
   however often it is requested); every tape that must be mounted costs one
   ``robot + load``; with more such tapes than drives, each extra mount follows a
   dismount (``unload + robot``); every locate that cannot be avoided costs at least the
   cheapest locate it can be. Spread evenly over the drives.
3. One tape: a tape's own work cannot be split across drives.
4. The robot: every mount and every forced dismount is one robot move; arms work in
   parallel.

A tape *must* be mounted when it holds every copy of a requested file. Files with copies
on several tapes may avoid any given tape; if one of them has no copy on a must tape, at
least one more mount is needed. Unavoidable locates on a must tape: requested files next
to each other on tape (any copy) form a run, read without locating; a run that holds a
file whose only copy in the catalog is there must be entered by a locate, unless it starts
at the beginning of the tape. The schedule may enter it at any of its files up to the
first such file (the ones before may be read from other copies), so the locate is charged
the cheapest into any of them from any place the head can be: the beginning of the tape,
or the end of a requested file on that tape (the head moves only by locating to a file it
reads and by reading it), except the ends of the run's own files up to that entry, which
it has not read yet.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tssd.backends.sim.catalog_csv import CatalogRow
from tssd.simulate.campaign import Arrival
from tssd.tape.geometry import Profile

MB = 10**6

#: Where a tape's objects lie: (volume, [(seq, catalog offset, size)] in sequence order)
#: -> their (start, end) on the locate model (the simulated library's true layout,
#: tssd.backends.sim.layout).
Layout = Callable[[str, Sequence[tuple[int, int, int]]], list[tuple[int, int]]]


def catalog_layout(volume: str, objects: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Objects exactly where the catalog's sizes put them."""
    del volume
    return [(offset, offset + size) for _, offset, size in objects]


@dataclass(frozen=True)
class BoundTerms:
    arrival_s: float
    drive_work_s: float
    single_tape_s: float
    robot_s: float
    must_tapes: int
    locates: int

    @property
    def value(self) -> float:
        return max(self.arrival_s, self.drive_work_s, self.single_tape_s, self.robot_s)


def lower_bound(
    arrivals: Sequence[Arrival],
    copies: dict[str, list[CatalogRow]],
    profile: Profile,
    drives: int,
    robot_arms: int,
    layout: Layout = catalog_layout,
) -> BoundTerms:
    wanted = {a.pnfsid for a in arrivals if a.pnfsid in copies}
    file_s = {p: profile.per_file_s + profile.transfer_s(copies[p][0].size) for p in wanted}
    must = {p: copies[p][0] for p in wanted if len({c.volume for c in copies[p]}) == 1}
    must_tapes = {row.volume for row in must.values()}
    uncovered = any(
        all(c.volume not in must_tapes for c in copies[p]) for p in wanted if p not in must
    )
    mounts = len(must_tapes) + (1 if uncovered else 0)
    locate_s, total_locates = _locate_floors(must_tapes, wanted, copies, profile, layout)
    per_tape_work = {v: profile.robot_s + profile.load_s for v in must_tapes}
    for p, row in must.items():
        per_tape_work[row.volume] += file_s[p]
    for volume, seconds in locate_s.items():
        per_tape_work[volume] += seconds
    extra = max(0, mounts - drives)
    work = (
        sum(file_s.values())
        + mounts * (profile.robot_s + profile.load_s)
        + extra * (profile.unload_s + profile.robot_s)
        + sum(locate_s.values())
    )
    return BoundTerms(
        arrival_s=_arrival_term(arrivals, file_s),
        drive_work_s=work / max(1, drives),
        single_tape_s=max(per_tape_work.values(), default=0.0),
        robot_s=(mounts + extra) * profile.robot_s / max(1, robot_arms),
        must_tapes=len(must_tapes),
        locates=total_locates,
    )


def _arrival_term(arrivals: Sequence[Arrival], file_s: dict[str, float]) -> float:
    """No request finishes before it arrives, and the first of a file not before its read.

    A later request for the same pnfsid may join the first while that is still open
    (one open request per file), so only the first arrival of each file is charged a read.
    """
    first: set[str] = set()
    latest = 0.0
    for a in sorted(arrivals, key=lambda a: a.at):
        if a.pnfsid not in file_s:
            continue
        latest = max(latest, a.at + (file_s[a.pnfsid] if a.pnfsid not in first else 0.0))
        first.add(a.pnfsid)
    return latest


@dataclass(frozen=True, slots=True)
class _Entry:
    """A run that needs a locate: the offsets it may be entered at, and the origins that
    cannot precede that entry (ends of its own files up to its first forced file)."""

    targets: tuple[int, ...]
    excluded: frozenset[int]


def _locate_floors(
    must_tapes: set[str],
    wanted: set[str],
    copies: dict[str, list[CatalogRow]],
    profile: Profile,
    layout: Layout,
) -> tuple[dict[str, float], int]:
    """Per must-tape, the sum over its forced entries of the cheapest locate into each;
    and the number of forced locates."""
    rows: dict[str, list[CatalogRow]] = defaultdict(list)
    for pnfsid_rows in copies.values():
        for row in pnfsid_rows:
            if row.volume in must_tapes:
                rows[row.volume].append(row)
    floors: dict[str, float] = {}
    count = 0
    for volume in must_tapes:
        tape = sorted(rows[volume], key=lambda r: r.seq)
        entries, origins = _forced_entries(tape, wanted, copies, layout)
        nearest = _Nearest(profile, origins)
        floors[volume] = sum(
            min(nearest.cheapest(t, e.excluded) for t in e.targets) for e in entries
        )
        count += len(entries)
    return floors, count


def _forced_entries(
    tape: Sequence[CatalogRow],
    wanted: set[str],
    copies: dict[str, list[CatalogRow]],
    layout: Layout,
) -> tuple[list[_Entry], list[int]]:
    """The locates every schedule makes on one tape (its rows in sequence order), and the
    places the head can be: the beginning of the tape and the end of each requested file.

    Requested files next to each other on tape form a run, read with no locate between
    them. A run holding a file whose only copy is this one (a *forced* file) must be
    entered, by a locate, at one of its files up to the first forced one: a run may be
    entered past files that have another copy elsewhere, or a second copy on this tape
    (the schedule may read that one instead). A run at the beginning of the tape is
    entered from BOT with no locate.
    """
    objects, used = [], 0
    for row in tape:
        objects.append((row.seq, used, row.size))
        used += row.size
    spans = layout(tape[0].volume, objects) if tape else []
    offsets = [start for start, _ in spans]
    requested = [row.pnfsid.upper() in wanted for row in tape]
    origins = [0] + [spans[i][1] for i in range(len(tape)) if requested[i]]
    entries: list[_Entry] = []
    i = 0
    while i < len(tape):
        if not requested[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(tape) and requested[j + 1]:
            j += 1
        forced = [k for k in range(i, j + 1) if len(copies[tape[k].pnfsid.upper()]) == 1]
        if forced and offsets[i] != 0:
            last = forced[0]
            targets = tuple(offsets[k] for k in range(i, last + 1))
            excluded = frozenset(spans[k][1] for k in range(i, last + 1))
            entries.append(_Entry(targets, excluded))
        i = j + 1
    return entries, origins


class _Nearest:
    """The cheapest locate to a target from any of a set of head positions.

    A locate costs base + travel + (other wrap) + (other band). Each origin is kept in
    three sorted lists: per wrap, per band and overall, charged its wrap and band change
    for the wider lists; the nearest origin of each list (by travel) gives that list's
    cheapest, and the minimum of the three is exact, since every origin appears at its
    true cost in the narrowest list it belongs to and above it in the wider ones. Origins
    the caller excludes are stepped over (a run's own file ends: few).
    """

    def __init__(self, profile: Profile, origins: Sequence[int]) -> None:
        self.profile, self.capacity = profile, profile.capacity_bytes
        self.origins = set(origins)
        by_wrap: dict[int, list[tuple[float, int]]] = defaultdict(list)
        by_band: dict[int, list[tuple[float, int]]] = defaultdict(list)
        every: list[tuple[float, int]] = []
        for offset in self.origins:
            x = profile.longitudinal(offset, self.capacity)
            by_wrap[profile.wrap_of(offset, self.capacity)].append((x, offset))
            by_band[profile.band_of(offset, self.capacity)].append((x, offset))
            every.append((x, offset))
        self.by_wrap = {k: _Sorted(v) for k, v in by_wrap.items()}
        self.by_band = {k: _Sorted(v) for k, v in by_band.items()}
        self.every = _Sorted(every)

    def cheapest(self, target: int, excluded: frozenset[int] = frozenset()) -> float:
        if target in self.origins and target not in excluded:
            return 0.0  # the head may already be there: no locate at all
        p, cap = self.profile, self.capacity
        x = p.longitudinal(target, cap)
        none = _Sorted([])
        wrap_dx = self.by_wrap.get(p.wrap_of(target, cap), none).closest(x, excluded)
        band_dx = self.by_band.get(p.band_of(target, cap), none).closest(x, excluded)
        any_dx = self.every.closest(x, excluded)
        return p.locate_base_s + min(
            wrap_dx * p.locate_full_s,
            band_dx * p.locate_full_s + p.wrap_change_s,
            any_dx * p.locate_full_s + p.wrap_change_s + p.band_change_s,
        )


class _Sorted:
    """Origins sorted by longitudinal position."""

    def __init__(self, items: list[tuple[float, int]]) -> None:
        items.sort()
        self.xs = [x for x, _ in items]
        self.offsets = [o for _, o in items]

    def closest(self, x: float, excluded: frozenset[int]) -> float:
        """Distance from *x* to the nearest origin not excluded (infinite when none)."""
        i = bisect_left(self.xs, x)
        best = float("inf")
        j = i - 1
        while j >= 0 and self.offsets[j] in excluded:
            j -= 1
        if j >= 0:
            best = x - self.xs[j]
        j = i
        while j < len(self.xs) and self.offsets[j] in excluded:
            j += 1
        if j < len(self.xs):
            best = min(best, self.xs[j] - x)
        return best

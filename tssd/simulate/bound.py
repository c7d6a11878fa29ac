"""A lower bound on the makespan of a recall campaign: no schedule can finish sooner.

Each term counts only work that every schedule must do, with the cheapest possible
cost, so the maximum of the terms is still a bound (derivation in docs/benchmarks.md):

1. Arrival: a file that arrives at ``at`` is not read before ``at + per_file + transfer``.
2. Drive work: every file costs ``per_file + transfer`` on some drive; every tape that
   must be mounted costs one ``robot + load``; with more such tapes than drives, each
   extra mount follows a dismount (``unload + robot``); every locate that cannot be avoided
   costs at least ``locate_base``. Spread evenly over the drives.
3. One tape: a tape's own work cannot be split across drives.
4. The robot: every mount and every forced dismount is one robot move; arms work in
   parallel.

A tape *must* be mounted when it holds the only copy of a requested file. Files with
several copies may avoid any given tape; if one of them has no copy on a must tape, at
least one more mount is needed. Unavoidable locates on a must tape: the maximal runs of
consecutive requested sequence numbers (any copy) that contain a must file, less one if
such a run starts at the beginning of the tape, because reading the next file costs no
locate and nothing else does. Each such locate costs at least the cheapest locate into
the run's first file from any place the head can be: the beginning of the tape, or the
end of a requested file on that tape (the head moves only by locating to a file it reads
and by reading it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tssd.backends.sim.catalog_csv import CatalogRow
from tssd.backends.sim.profiles import Profile
from tssd.simulate.campaign import Arrival

MB = 10**6


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
) -> BoundTerms:
    wanted = {a.pnfsid for a in arrivals if a.pnfsid in copies}
    file_s = {p: profile.per_file_s + profile.transfer_s(copies[p][0].size) for p in wanted}
    must = {p: copies[p][0] for p in wanted if len({c.volume for c in copies[p]}) == 1}
    must_tapes = {row.volume for row in must.values()}
    uncovered = any(
        all(c.volume not in must_tapes for c in copies[p]) for p in wanted if p not in must
    )
    mounts = len(must_tapes) + (1 if uncovered else 0)
    heads = _unavoidable_locates(wanted, must, copies)
    locate_s = _locate_floors(heads, wanted, copies, profile)
    per_tape_work = {v: profile.robot_s + profile.load_s for v in must_tapes}
    for p, row in must.items():
        per_tape_work[row.volume] += file_s[p]
    for volume, seconds in locate_s.items():
        per_tape_work[volume] += seconds
    total_locates = sum(len(h) for h in heads.values())
    extra = max(0, mounts - drives)
    work = (
        sum(file_s.values())
        + mounts * (profile.robot_s + profile.load_s)
        + extra * (profile.unload_s + profile.robot_s)
        + sum(locate_s.values())
    )
    arrival = max((a.at + file_s[a.pnfsid] for a in arrivals if a.pnfsid in file_s), default=0.0)
    return BoundTerms(
        arrival_s=arrival,
        drive_work_s=work / max(1, drives),
        single_tape_s=max(per_tape_work.values(), default=0.0),
        robot_s=(mounts + extra) * profile.robot_s / max(1, robot_arms),
        must_tapes=len(must_tapes),
        locates=total_locates,
    )


def _unavoidable_locates(
    wanted: set[str], must: dict[str, CatalogRow], copies: dict[str, list[CatalogRow]]
) -> dict[str, list[int]]:
    """Per must-tape, the first sequence number of each run that needs a locate."""
    must_tapes = {row.volume for row in must.values()}
    positions: dict[str, dict[int, bool]] = {v: {} for v in must_tapes}
    for p in wanted:
        for c in copies[p]:
            if c.volume in positions:
                is_must = p in must
                positions[c.volume][c.seq] = positions[c.volume].get(c.seq, False) or is_must
    result: dict[str, list[int]] = {}
    for volume, seqs in positions.items():
        runs = _runs(sorted(seqs))
        result[volume] = [r[0] for r in runs if any(seqs[s] for s in r) and r[0] != 1]
    return result


def _locate_floors(
    heads: dict[str, list[int]],
    wanted: set[str],
    copies: dict[str, list[CatalogRow]],
    profile: Profile,
) -> dict[str, float]:
    """Per must-tape, the sum over its run heads of the cheapest locate into each."""
    sizes: dict[str, dict[int, int]] = defaultdict(dict)
    requested: dict[str, set[int]] = defaultdict(set)
    for pnfsid, rows in copies.items():
        for row in rows:
            if row.volume in heads:
                sizes[row.volume][row.seq] = row.size
                if pnfsid in wanted:
                    requested[row.volume].add(row.seq)
    floors: dict[str, float] = {}
    for volume, firsts in heads.items():
        offsets, used = {}, 0
        for seq in sorted(sizes[volume]):
            offsets[seq] = used
            used += sizes[volume][seq]
        origins = [0] + [offsets[s] + sizes[volume][s] for s in requested[volume]]
        # A gap in the sequence numbers is no gap on tape: the head is already there.
        at_origin = set(origins)
        targets = [offsets[s] for s in firsts if offsets[s] not in at_origin]
        nearest = _Nearest(profile, origins)
        floors[volume] = sum(nearest.cheapest(offset) for offset in targets)
    return floors


class _Nearest:
    """The cheapest locate to a target from any of a set of head positions.

    A locate costs base + travel + (other wrap) + (other band). Each origin is kept in
    three sorted lists: per wrap, per band and overall, charged its wrap and band change
    for the wider lists; the nearest origin of each list (by travel) gives that list's
    cheapest, and the minimum of the three is exact, since every origin appears at its
    true cost in the narrowest list it belongs to and above it in the wider ones.
    """

    def __init__(self, profile: Profile, origins: Sequence[int]) -> None:
        self.profile, self.capacity = profile, profile.capacity_bytes
        self.by_wrap: dict[int, list[float]] = defaultdict(list)
        self.by_band: dict[int, list[float]] = defaultdict(list)
        self.every: list[float] = []
        for offset in origins:
            x = profile.longitudinal(offset, self.capacity)
            self.by_wrap[profile.wrap_of(offset, self.capacity)].append(x)
            self.by_band[profile.band_of(offset, self.capacity)].append(x)
            self.every.append(x)
        for xs in (*self.by_wrap.values(), *self.by_band.values(), self.every):
            xs.sort()

    def cheapest(self, target: int) -> float:
        p, cap = self.profile, self.capacity
        x = p.longitudinal(target, cap)
        wrap_dx = _closest(self.by_wrap.get(p.wrap_of(target, cap), []), x)
        band_dx = _closest(self.by_band.get(p.band_of(target, cap), []), x)
        any_dx = _closest(self.every, x)
        return p.locate_base_s + min(
            wrap_dx * p.locate_full_s,
            band_dx * p.locate_full_s + p.wrap_change_s,
            any_dx * p.locate_full_s + p.wrap_change_s + p.band_change_s,
        )


def _closest(xs: list[float], x: float) -> float:
    """Distance from *x* to the nearest value of sorted *xs* (infinite when empty)."""
    i = bisect_left(xs, x)
    return min((abs(xs[j] - x) for j in (i - 1, i) if 0 <= j < len(xs)), default=float("inf"))


def _runs(seqs: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][-1] == seq - 1:
            runs[-1].append(seq)
        else:
            runs.append([seq])
    return runs

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
locate and nothing else does.
"""

from __future__ import annotations

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
    locates = _unavoidable_locates(wanted, must, copies)
    per_tape_work = {v: profile.robot_s + profile.load_s for v in must_tapes}
    for p, row in must.items():
        per_tape_work[row.volume] += file_s[p]
    for volume, n in locates.items():
        per_tape_work[volume] += n * profile.locate_base_s
    total_locates = sum(locates.values())
    extra = max(0, mounts - drives)
    work = (
        sum(file_s.values())
        + mounts * (profile.robot_s + profile.load_s)
        + extra * (profile.unload_s + profile.robot_s)
        + total_locates * profile.locate_base_s
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
) -> dict[str, int]:
    must_tapes = {row.volume for row in must.values()}
    positions: dict[str, dict[int, bool]] = {v: {} for v in must_tapes}
    for p in wanted:
        for c in copies[p]:
            if c.volume in positions:
                is_must = p in must
                positions[c.volume][c.seq] = positions[c.volume].get(c.seq, False) or is_must
    result: dict[str, int] = {}
    for volume, seqs in positions.items():
        runs = _runs(sorted(seqs))
        needed = [r for r in runs if any(seqs[s] for s in r)]
        result[volume] = len(needed) - (1 if needed and needed[0][0] == 1 else 0)
    return result


def _runs(seqs: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][-1] == seq - 1:
            runs[-1].append(seq)
        else:
            runs.append([seq])
    return runs

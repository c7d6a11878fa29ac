"""The best schedule of a tiny recall campaign on one drive, by exhaustive search.

It checks :mod:`tssd.simulate.bound` (tests): the bound must never exceed what the best
schedule achieves on the simulated library's cost model (``SimLibrary``: a mount is
``robot + load`` with the head at BOT, a dismount ``rewind + unload + robot``, a read
``locate + per_file + transfer`` leaving the head at the file's end).

The search is generous to the schedule where the daemon is not, so that its optimum is
never above the true one: a drive may mount and locate before any request arrives. A
read of a file starts no sooner than the earliest open request for it and serves every
request for that file that arrives before the read ends (one open request per file); it
may be put off so that a later request joins it. Exponential: a handful of requests only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tssd.backends.sim.catalog_csv import CatalogRow
from tssd.simulate.campaign import Arrival
from tssd.tape.geometry import Profile

#: Requests beyond which the search would take too long to be useful.
MAX_ARRIVALS = 6


@dataclass(frozen=True, slots=True)
class _Copy:
    volume: str
    offset: int
    size: int


def best_makespan_s(
    arrivals: Sequence[Arrival], copies: dict[str, list[CatalogRow]], profile: Profile
) -> float:
    """The least makespan of any one-drive schedule serving *arrivals*."""
    if len(arrivals) > MAX_ARRIVALS:
        raise ValueError(f"exhaustive search takes at most {MAX_ARRIVALS} requests")
    wanted = [a for a in sorted(arrivals, key=lambda a: a.at) if a.pnfsid in copies]
    search = _Search(wanted, _layout(copies), profile)
    search.run(0.0, None, 0, 0, 0.0, mounted_now=False)
    return search.best


def _layout(copies: dict[str, list[CatalogRow]]) -> dict[str, list[_Copy]]:
    """Every copy of every pnfsid with its byte offset (sizes of lower seqs on its tape)."""
    tapes: dict[str, list[CatalogRow]] = defaultdict(list)
    for rows in copies.values():
        for row in rows:
            tapes[row.volume].append(row)
    placed: dict[str, list[_Copy]] = defaultdict(list)
    for volume, rows in tapes.items():
        used = 0
        for row in sorted(rows, key=lambda r: r.seq):
            placed[row.pnfsid.upper()].append(_Copy(volume, used, row.size))
            used += row.size
    return placed


class _Search:
    def __init__(
        self, arrivals: list[Arrival], placed: dict[str, list[_Copy]], profile: Profile
    ) -> None:
        self.arrivals, self.placed, self.profile = arrivals, placed, profile
        self.full = (1 << len(arrivals)) - 1
        self.best = float("inf") if arrivals else 0.0
        self.capacity = profile.capacity_bytes
        self.volumes = sorted({c.volume for cs in placed.values() for c in cs})

    def run(
        self,
        t: float,
        volume: str | None,
        head: int,
        served: int,
        makespan: float,
        *,
        mounted_now: bool,
    ) -> None:
        if served == self.full:
            self.best = min(self.best, makespan)
            return
        if t >= self.best:
            return  # every remaining read ends after t
        open_files = {a.pnfsid for i, a in enumerate(self.arrivals) if not served & (1 << i)}
        if volume is not None:
            for pnfsid in sorted(open_files):
                for copy in self.placed[pnfsid]:
                    if copy.volume == volume:
                        self._read(t, volume, head, served, makespan, pnfsid, copy)
        if mounted_now:
            return  # a mount is followed by a read: no endless remounting
        p = self.profile
        unmount = (
            0.0 if volume is None else p.rewind_s(head, self.capacity) + p.unload_s + p.robot_s
        )
        for other in self.volumes:
            if any(c.volume == other for f in open_files for c in self.placed[f]):
                done = t + unmount + p.robot_s + p.load_s
                self.run(done, other, 0, served, makespan, mounted_now=True)

    def _read(
        self,
        t: float,
        volume: str,
        head: int,
        served: int,
        makespan: float,
        pnfsid: str,
        copy: _Copy,
    ) -> None:
        p = self.profile
        duration = p.per_file_s + p.transfer_s(copy.size)
        pending = [
            (i, a.at)
            for i, a in enumerate(self.arrivals)
            if a.pnfsid == pnfsid and not served & (1 << i)
        ]
        earliest = max(t + p.locate_s(head, copy.offset, self.capacity), pending[0][1])
        starts = {earliest} | {at - duration for _, at in pending if at - duration > earliest}
        for start in sorted(starts):
            end = start + duration
            joined = served
            for i, at in pending:
                if at <= end:
                    joined |= 1 << i
            self.run(
                end, volume, copy.offset + copy.size, joined, max(makespan, end), mounted_now=False
            )

"""Replay each tape's requested reads from BOT through the scheduler's read planning,
against the simulated library's true layout, without the rest of the simulator.

Usage: python benchmarks/sparse_replay.py CAMPAIGN_DIR [--profile lto9] [--tapes N]
           [--exact]

Every tape of the campaign is mounted once with all its requested copies in one batch
(what the sparse campaign gives with ``scheduler.fill_wait_s=600``), read by
``PlannedReads`` (the calibration, the robust tour and the lookahead of small batches)
on the estimated positions; each locate is timed on the true layout
(``tssd/backends/sim/layout.py`` at its defaults). Prints the summed locate seconds of
``auto`` and of position order (``rao=off``). ``--exact`` tells the planner the true
offsets (the value of knowing the layout exactly). Seconds of CPU, not hours: it is how
a change of the read planning is tried before a whole ``tssd simulate`` run.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tssd.backends.base import ReadItem, ReadResult, TapeCopy
from tssd.backends.sim.layout import physical_offsets
from tssd.config import SimSettings
from tssd.scheduler.drives import DriveState
from tssd.scheduler.reads import PlannedReads
from tssd.tape.geometry import ESTIMATE_SPREAD, Profile, get_profile

EPOCH = datetime(2019, 1, 1, tzinfo=UTC)


class TrueTape:
    """A backend of one mounted tape: locates timed on the true layout."""

    def __init__(self, profile: Profile, truth: dict[int, tuple[int, int]]) -> None:
        self.profile, self.truth = profile, truth
        self.head, self.locate = 0, 0.0

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        for item in items:
            start, end = self.truth[item.copy.offset]
            s = self.profile.locate_s(self.head, start, self.profile.capacity_bytes)
            self.locate += s
            self.head = end
            yield ReadResult(item, nbytes=item.copy.size, locate_s=s)


async def _offload(fn):  # type: ignore[no-untyped-def]
    return fn()


async def replay_tape(
    profile: Profile, mode: str, objects: list[tuple[int, int, int]],
    wanted: set[int], settings: SimSettings, volume: str, exact: bool,
) -> float:  # fmt: skip
    places = physical_offsets(
        volume, objects, settings.layout_spread, settings.file_spread, settings.seed
    )
    truth = {o[1]: p for o, p in zip(objects, places, strict=True)}
    items = []
    for seq, offset, size in objects:
        if seq in wanted:
            est = truth[offset][0] if exact else offset
            copy = TapeCopy(f"{volume}{seq}", f"b{volume}{seq}", volume, seq, size, None,
                            None, EPOCH, offset=est)  # fmt: skip
            items.append(ReadItem(copy, None))  # type: ignore[arg-type]
    if exact:
        truth = {truth[o][0]: truth[o] for o in truth}
    backend = TrueTape(profile, truth)
    layout = dataclasses.replace(profile, position_spread=0.0 if exact else ESTIMATE_SPREAD)
    planner = PlannedReads(backend, _offload, mode)  # type: ignore[arg-type]
    drive = DriveState(name="d0", volume=volume)
    async for result in planner.read(drive, volume, layout, items, {}):
        drive.head_offset = result.item.copy.offset + result.item.copy.size
    return backend.locate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--profile", default="lto9")
    parser.add_argument("--tapes", type=int, default=0, help="only the first N tapes")
    parser.add_argument("--exact", action="store_true")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    settings = SimSettings()
    objects: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    seq_of: dict[str, tuple[str, int]] = {}
    ends: dict[str, int] = defaultdict(int)
    with (args.campaign / "catalog.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            volume, seq, size = row["volume"], int(row["seq"]), int(row["size"])
            objects[volume].append((seq, ends[volume], size))
            ends[volume] += size
            seq_of.setdefault(row["pnfsid"], (volume, seq))
    wanted: dict[str, set[int]] = defaultdict(set)
    with (args.campaign / "requests.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            volume, seq = seq_of[row["pnfsid"]]
            wanted[volume].add(seq)
    volumes = sorted(wanted)[: args.tapes or None]
    totals = {}
    for mode in ("auto", "off"):
        exact = args.exact and mode == "auto"
        totals[mode] = sum(
            asyncio.run(replay_tape(profile, mode, objects[v], wanted[v], settings, v, exact))
            for v in volumes
        )
    auto, off = totals["auto"], totals["off"]
    print(f"{len(volumes)} tapes: locate auto {auto:,.0f} s, position order {off:,.0f} s "
          f"({(auto - off) / off:+.1%})")  # fmt: skip


if __name__ == "__main__":
    main()

"""Where the simulated library's objects truly lie on tape: known to the library only.

A real site's tape manager (IBM SP) knows each object's volume, sequence number and size,
and the media type; the scheduler estimates positions from those (the cumulative size of
the objects before a copy, on the media type's nominal geometry). On a real cartridge the
bytes on tape differ from the bytes of the objects:

* the drive compresses (LTO's SLDC, ECMA-321, falls back to pass-through on data that is
  already compressed, as the ROOT files of HEP are): data of one tape, written by one
  experiment in one period, compresses about alike, so a per-tape factor;
* data sets that fail read-after-write are written again further down the tape (a
  per-tape wear effect) and every object carries its own headers, file mark and
  compressibility: a per-file factor;
* wraps end where the *physical* bytes fill them, so the estimate's wrap boundaries drift
  from the truth along the tape.

The true physical offset of an object is the sum over the objects before it of
``size * tape_factor * file_factor``; ``tape_factor`` is uniform in
``1 +- sim.layout_spread`` and ``file_factor`` normal around 1 with standard deviation
``sim.file_spread``, both drawn from a hash of (seed, volume, seq): the same catalog has the
same layout in every run. The spreads are estimates, not vendor figures (docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections.abc import Sequence

from tssd.config import SimSettings
from tssd.tape.geometry import Profile, reported


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.blake2b("/".join(map(str, (seed, *parts))).encode(), digest_size=8)
    return random.Random(int.from_bytes(digest.digest(), "big"))


def tape_factor(volume: str, spread: float, seed: int) -> float:
    """Physical bytes per object byte on *volume* (compression, rewritten data sets)."""
    if spread <= 0:
        return 1.0
    return 1.0 + _rng(seed, volume).uniform(-spread, spread)


def physical_offsets(
    volume: str,
    objects: Sequence[tuple[int, int, int]],
    tape_spread: float,
    file_spread: float,
    seed: int,
) -> list[tuple[int, int]]:
    """True (start, end) offsets, in native physical bytes, of the objects (seq, offset,
    size) of *volume*, given in sequence order with their catalog offsets. Bytes between
    objects (deleted ones) count at the tape's factor."""
    factor = tape_factor(volume, tape_spread, seed)
    out: list[tuple[int, int]] = []
    used, logical_end = 0.0, 0
    for seq, offset, size in objects:
        used += max(0, offset - logical_end) * factor
        start = used
        noise = 1.0
        if file_spread > 0:
            noise = max(0.5, _rng(seed, volume, seq).gauss(1.0, file_spread))
        used += size * factor * noise
        out.append((int(start), int(used)))
        logical_end = offset + size
    return out


def wrap_report(
    objects: Sequence[tuple[int, int, int]],
    places: Sequence[tuple[int, int]],
    wrap_bytes: int,
) -> list[int]:
    """What the simulated drive answers READ END OF WRAP POSITION with, in the catalog's
    offset space: the offset where each wrap the data reaches ends, then the end of data
    (a real drive's last descriptor is the last object written, CTA's RAOHelpers.hpp).

    *objects* (seq, offset, size) in sequence order and their true *places* (start, end)
    from :func:`physical_offsets`. A wrap ends at a multiple of *wrap_bytes* of physical
    bytes; the catalog offset there is interpolated inside the object (or the gap between
    two) it falls in, which is where the drive's block at the wrap's end belongs.
    """
    knots: list[tuple[int, int]] = [(0, 0)]
    for (_, offset, size), (start, end) in zip(objects, places, strict=True):
        knots += [(start, offset), (end, offset + size)]
    logical_end = knots[-1][1]
    ends: list[int] = []
    boundary, k = wrap_bytes, 0
    for (p0, c0), (p1, c1) in itertools.pairwise(knots):
        while boundary < p1:  # p1 > p0 then: the boundary is at or past p0
            k += 1
            ends.append(c0 + round((boundary - p0) * (c1 - c0) / (p1 - p0)))
            boundary = (k + 1) * wrap_bytes
    return [*ends, logical_end]


def drive_geometry(
    profile: Profile,
    capacity: int,
    volume: str,
    objects: Sequence[tuple[int, int, int]],
    settings: SimSettings,
) -> Profile | None:
    """*profile* at *capacity* with the wrap ends the drive holding *volume* reports
    (``sim.drive_geometry``); None when it tells nothing (all data in the first wrap)."""
    s = settings
    places = physical_offsets(volume, objects, s.layout_spread, s.file_spread, s.seed)
    ends = wrap_report(objects, places, profile.wrap_bytes(capacity))
    return reported(dataclasses.replace(profile, capacity_bytes=capacity), ends)

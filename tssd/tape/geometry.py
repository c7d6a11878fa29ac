"""Drive and media models: geometry and timing, for the simulated library and the scheduler.

Backend-neutral: the simulated library times its hardware with a profile; any backend
that knows a volume's media type gives the scheduler that type's nominal geometry
(:meth:`tssd.backends.base.TapeBackend.geometry`), on which software RAO plans, or, where
the volume's drive reports where its wraps end (READ END OF WRAP POSITION), that
geometry with the reported wrap ends (:func:`reported`, ``Profile.wrap_ends``).

Figures come from IBM's and Oracle's drive specifications and GridKa's measurements
(their CHEP 2019 paper); where a vendor gives none, the value is an estimate and says so.
All durations are seconds of simulated hardware time, before any ``time_scale``.

The medium is serpentine, like LTO and T10000: bytes fill one wrap (a pass over the
whole tape length) after another; even wraps run from the beginning of tape (BOT) to the
end (EOT), odd wraps back, and consecutive groups of wraps form a band. A byte offset
therefore maps to a wrap and a longitudinal position, and a locate costs a fixed part,
the longitudinal travel, a wrap change and, larger, a band change. This is why two files
far apart in sequence may be physically close (the start of wrap 1 sits at EOT, next to
the end of wrap 0), and why sequence order is not always the cheapest order (RAO).
"""

from __future__ import annotations

import dataclasses
import itertools
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tssd.errors import ConfigError

MB = 10**6
TB = 10**12


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    #: Native streaming rate, MB/s (10^6 bytes).
    rate_mb_s: float
    capacity_bytes: int
    #: Robot move of a cartridge between slot and drive (each way), per arm.
    robot_s: float
    #: Load and thread, until the drive is ready at BOT.
    load_s: float
    #: Unload once rewound (the rewind is counted apart, see rewind_full_s).
    unload_s: float
    #: Fixed part of any locate (stop, reposition, start streaming again).
    locate_base_s: float
    #: Longitudinal travel over the full tape length, BOT to EOT, at locate speed.
    locate_full_s: float
    #: Extra cost when the target lies on another wrap of the same band.
    wrap_change_s: float
    #: Extra cost, on top of the wrap change, when the target lies in another band.
    band_change_s: float
    #: Rewind from EOT to BOT; a rewind from longitudinal position x costs x times this.
    rewind_full_s: float
    #: Per-object overhead of the tape manager and drive (SP object and transaction
    #: set-up, object header, filemark, backhitch).
    per_file_s: float
    #: Wraps on the medium; bytes fill wrap after wrap.
    wraps: int = 280
    #: Bands the wraps are grouped in (LTO: 4).
    bands: int = 4
    #: Appended to the six-character volume serial, as in the library's barcodes.
    volume_suffix: str = ""
    description: str = ""
    #: Rewind as part of unload in published steps (LTO-9: 55/110/165 s), by the mount's
    #: activity (``rewind_step_bytes``); empty: ``rewind_full_s`` times the head's
    #: longitudinal position.
    rewind_steps_s: tuple[float, ...] = ()
    #: The published bounds between the steps: a mount that only transferred data
    #: contiguously from BOT, less than the first bound, takes the first step, less than
    #: the second the second, and so on; any other activity (a locate away from where
    #: the head was) takes the last step.
    rewind_step_bytes: tuple[int, ...] = ()
    #: How far the positions RAO plans on may be off, as a share of the offset: 0 when
    #: they are exact; an estimate from object sizes is off by the tape's compression and
    #: rewrite factor (``ESTIMATE_SPREAD``). RAO then keeps only orders that win over
    #: that range of factors.
    position_spread: float = 0.0
    #: Where each wrap ends, in the catalog's offset space (the offset of the first byte
    #: of the next wrap), from the drive's own report (READ END OF WRAP POSITION,
    #: :func:`reported`); the wraps after the last one reported are extrapolated at
    #: their mean length. Empty: wraps of ``capacity / wraps`` bytes (nominal geometry).
    wrap_ends: tuple[int, ...] = ()

    # -- geometry ----------------------------------------------------------------------

    def wrap_bytes(self, capacity: int) -> int:
        return max(1, capacity // self.wraps)

    def wrap_of(self, offset: int, capacity: int) -> int:
        if self.wrap_ends:
            return _reported_place(self.wrap_ends, offset, self.wraps)[0]
        return min(self.wraps - 1, max(0, offset) // self.wrap_bytes(capacity))

    def band_of(self, offset: int, capacity: int) -> int:
        per_band = max(1, -(-self.wraps // self.bands))
        return self.wrap_of(offset, capacity) // per_band

    def longitudinal(self, offset: int, capacity: int) -> float:
        """Head position along the tape for byte *offset*: 0.0 at BOT, 1.0 at EOT."""
        if self.wrap_ends:
            wrap, along = _reported_place(self.wrap_ends, offset, self.wraps)
            return along if wrap % 2 == 0 else 1.0 - along
        wrap_bytes = self.wrap_bytes(capacity)
        wrap = self.wrap_of(offset, capacity)
        along = min(1.0, (max(0, offset) - wrap * wrap_bytes) / wrap_bytes)
        return along if wrap % 2 == 0 else 1.0 - along

    # -- costs -------------------------------------------------------------------------

    def transfer_s(self, nbytes: int) -> float:
        return nbytes / (self.rate_mb_s * MB)

    def locate_s(self, head_offset: int, target_offset: int, capacity: int) -> float:
        """Seconds to move the head from byte *head_offset* to *target_offset*.

        Zero when the head is already there (reading the next file on tape). A pure
        function of its arguments, for schedulers ordering reads (RAO); the arithmetic
        is that of :meth:`wrap_of`, :meth:`longitudinal` and :meth:`band_of`, inlined
        because RAO calls this hundreds of thousands of times per campaign.
        """
        if head_offset == target_offset:
            return 0.0
        if self.wrap_ends:
            head_wrap, head_along = _reported_place(self.wrap_ends, head_offset, self.wraps)
            target_wrap, target_along = _reported_place(self.wrap_ends, target_offset, self.wraps)
            if head_wrap % 2:
                head_along = 1.0 - head_along
            if target_wrap % 2:
                target_along = 1.0 - target_along
            distance = abs(target_along - head_along)
        else:
            wrap_bytes = max(1, capacity // self.wraps)
            head_wrap = min(self.wraps - 1, max(0, head_offset) // wrap_bytes)
            target_wrap = min(self.wraps - 1, max(0, target_offset) // wrap_bytes)
            distance = abs(
                _along(target_offset, target_wrap, wrap_bytes)
                - _along(head_offset, head_wrap, wrap_bytes)
            )
        cost = self.locate_base_s + distance * self.locate_full_s
        if head_wrap != target_wrap:
            cost += self.wrap_change_s
            per_band = max(1, -(-self.wraps // self.bands))
            if head_wrap // per_band != target_wrap // per_band:
                cost += self.band_change_s
        return cost

    def rewind_s(self, head_offset: int, capacity: int) -> float:
        """Rewind before unload: grows with the head's distance from BOT."""
        return self.longitudinal(head_offset, capacity) * self.rewind_full_s

    def unload_rewind_s(self, head_offset: int, capacity: int, contiguous: int | None) -> float:
        """Rewind on unload after a mount that transferred *contiguous* bytes, all of them
        contiguously from BOT, or (None) did anything else (IBM's steps for LTO-9)."""
        if not self.rewind_steps_s:
            return self.rewind_s(head_offset, capacity)
        if contiguous == 0 and head_offset == 0:
            return 0.0  # the head never moved
        if contiguous is None:
            return self.rewind_steps_s[-1]
        index = sum(contiguous >= bound for bound in self.rewind_step_bytes)
        return self.rewind_steps_s[min(index, len(self.rewind_steps_s) - 1)]

    def typical_unload_rewind_s(self) -> float:
        """The rewind on unload to plan with: with published steps the last, which any
        mount that locates takes (a recall session does, from BOT to its first file
        and between runs); else from mid-tape."""
        if self.rewind_steps_s:
            return self.rewind_steps_s[-1]
        return self.rewind_full_s / 2

    def mount_s(self) -> float:
        """Robot move and load of an empty drive, arms free."""
        return self.robot_s + self.load_s

    def as_dict(self) -> dict[str, Any]:
        """Every parameter, for ``tssd simulate --list-profiles --json``."""
        return dataclasses.asdict(self)


# Calibration (sources in docs/benchmarks.md, "Profiles and their sources"): the vendors'
# "average locate" is measured from the load point (BOT) to a random file, so the model's
# average from BOT, locate_base + locate_full / 2 + wrap_change + 3/4 band_change (a
# random target is on another wrap almost always, in another band 3 times in 4), equals
# it. A locate between two random positions then averages locate_base + locate_full / 3
# + the same changes. Rewind on unload: LTO-9 follows IBM's published steps; the others
# rewind_full times the head's position (the "avg rewind" column is rewind_full / 2).
LTO9 = Profile(
    name="lto9",
    rate_mb_s=400.0,
    capacity_bytes=18 * TB,
    robot_s=12.0,  # SL8500 rail: 10-15 s
    load_s=17.0,
    unload_s=30.0,
    locate_base_s=8.0,  # estimate (short locates, GridKa-like; see the T10K profile)
    locate_full_s=64.0,  # 8 + 32 + 2 + 3 = 45 s average locate from BOT (IBM)
    wrap_change_s=2.0,  # estimate
    band_change_s=4.0,  # estimate
    rewind_full_s=110.0,  # 55 s average rewind (IBM); planning only, see the steps
    per_file_s=3.0,  # estimate; the GridKa-calibrated T10K figure below is 5 s
    wraps=280,
    bands=4,
    volume_suffix="L9",
    description="IBM LTO-9 full height (TS4500 specification)",
    # IBM: rewind on unload 55 s below 5 GB of contiguous data transferred, 110 s from 5
    # to 50 GB, 165 s for all other mount activity.
    rewind_steps_s=(55.0, 110.0, 165.0),
    rewind_step_bytes=(5 * 10**9, 50 * 10**9),
)

LTO8 = Profile(
    name="lto8",
    rate_mb_s=360.0,
    capacity_bytes=12 * TB,
    robot_s=12.0,
    load_s=15.0,
    unload_s=24.0,
    locate_base_s=10.0,  # estimate
    locate_full_s=88.0,  # 10 + 44 + 2 + 3 = 59 s average locate from BOT (IBM)
    wrap_change_s=2.0,  # estimate
    band_change_s=4.0,  # estimate
    rewind_full_s=118.0,  # 59 s average rewind
    per_file_s=3.0,  # estimate
    wraps=208,
    bands=4,
    volume_suffix="L8",
    description="IBM LTO-8 full height rate, half-height load/unload/locate figures",
)

LTO7 = Profile(
    name="lto7",
    rate_mb_s=300.0,
    capacity_bytes=6 * TB,
    robot_s=12.0,
    load_s=15.0,
    unload_s=20.0,
    locate_base_s=10.0,  # estimate
    locate_full_s=82.0,  # 10 + 41 + 2 + 3 = 56 s average locate from BOT (IBM)
    wrap_change_s=2.0,  # estimate
    band_change_s=4.0,  # estimate
    rewind_full_s=120.0,  # 60 s average rewind
    per_file_s=3.0,  # estimate
    wraps=112,
    bands=4,
    volume_suffix="L7",
    description="IBM LTO-7 half height (TS4500 specification)",
)

# IBM publishes rate and capacity only (its drive specifications): the rest is estimated
# like LTO-9 (same generation of drive mechanics), so RAO has a geometry to plan on.
TS1160 = Profile(
    name="ts1160",
    rate_mb_s=400.0,
    capacity_bytes=20 * TB,
    robot_s=12.0,
    load_s=17.0,  # estimate
    unload_s=30.0,  # estimate
    locate_base_s=8.0,  # estimate
    locate_full_s=64.0,  # estimate
    wrap_change_s=2.0,  # estimate
    band_change_s=4.0,  # estimate
    rewind_full_s=110.0,  # estimate
    per_file_s=3.0,  # estimate
    wraps=272,  # estimate
    bands=4,  # estimate
    volume_suffix="JE",
    description="IBM TS1160 (3592 JE media); figures other than rate and capacity estimated",
)

# Calibrated on GridKa's figures (their CHEP 2019 paper, 2.0 GB average files):
# whole-tape recall ~150 MB/s per drive means 2000 MB / 250 MB/s + per_file = 13 s per
# file, so per_file is about 5 s. Individual files (~82 % of each tape) ran at ~130 MB/s:
# 15.4 s per file, i.e. ~2.4 s of locating per file; with ~18 % of reads needing one,
# each locate costs ~13 s. Skipping a file or two moves the head a few GB, inside one
# 42 GB wrap most of the time, so that locate is mostly the fixed part.
GRIDKA_T10K = Profile(
    name="gridka-t10k",
    rate_mb_s=250.0,  # T10000D, unverified vendor figure
    capacity_bytes=8_500_000_000_000,
    robot_s=12.0,
    load_s=15.0,  # estimate
    unload_s=20.0,  # estimate
    locate_base_s=12.0,
    locate_full_s=100.0,  # estimate
    wrap_change_s=2.0,  # estimate
    band_change_s=4.0,  # estimate
    rewind_full_s=100.0,  # estimate
    per_file_s=5.0,
    wraps=200,  # estimate
    bands=4,  # estimate
    volume_suffix="",
    description="Oracle T10000D in an SL8500 as at GridKa, calibrated on CHEP 2019 figures",
)

#: The share by which positions estimated from object sizes may be off (per-tape
#: compression and rewritten data sets; docs/benchmarks.md, "true layout").
ESTIMATE_SPREAD = 0.03

PROFILES: dict[str, Profile] = {p.name: p for p in (LTO9, LTO8, LTO7, TS1160, GRIDKA_T10K)}

#: Media types an operator may name for a library or tape (``scsi.media``), and the
#: barcode suffixes that name them.
MEDIA: dict[str, Profile] = {
    "lto7": LTO7, "lto8": LTO8, "lto9": LTO9, "3592": TS1160, "ts1160": TS1160,
    "t10k": GRIDKA_T10K, "gridka-t10k": GRIDKA_T10K,
}  # fmt: skip
SUFFIXES: dict[str, Profile] = {"L7": LTO7, "L8": LTO8, "M8": LTO8, "L9": LTO9, "JE": TS1160}


def media_profile(volume: str, media: str = "") -> Profile | None:
    """The nominal model of *volume*'s media: *media* when named, else the barcode's
    suffix (``ABC123L9``); None when neither tells."""
    if media:
        return MEDIA.get(media.lower())
    if len(volume) == 8:
        return SUFFIXES.get(volume[6:].upper())
    return None


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        valid = ", ".join(sorted(PROFILES))
        raise ConfigError(f"unknown sim.profile {name!r}: choose one of {valid}") from None


#: How far positions on a drive-reported geometry may be off: 0, the wraps are the
#: drive's own and a copy's place along its wrap is interpolated between the wrap's ends
#: (what is left, the per-object variation within one wrap, is a fraction of a second
#: of locate: docs/benchmarks.md, "The drive's own report").
REPORTED_SPREAD = 0.0


def reported(profile: Profile, ends: Sequence[int]) -> Profile | None:
    """*profile* with the wrap ends a drive reported, as offsets in the catalog's offset
    space, in wrap order (wrap 0 first); None when the report says nothing useful.

    The drive's last descriptor is the end of data, not the end of a wrap (IBM's LTO
    SCSI reference; CTA's ``RAOHelpers::improveEndOfLastWrapPositionIfPossible`` replaces
    it with the mean wrap length): it is dropped, and the wraps after the last complete
    one are extrapolated at the mean length of the complete ones. A report of one wrap
    (all data in wrap 0) or one that does not increase says nothing: None.
    """
    complete = tuple(int(e) for e in ends[:-1])
    if not complete or complete[0] <= 0 or any(b <= a for a, b in itertools.pairwise(complete)):
        return None
    return dataclasses.replace(
        profile,
        wrap_ends=complete,
        position_spread=REPORTED_SPREAD,
        wraps=max(profile.wraps, len(complete) + 1),
    )


def _reported_place(ends: tuple[int, ...], offset: int, wraps: int) -> tuple[int, float]:
    """(wrap, share of the wrap's length from its start) of *offset* on reported *ends*."""
    offset = max(0, offset)
    wrap = bisect_right(ends, offset)
    if wrap < len(ends):
        start = ends[wrap - 1] if wrap else 0
        return wrap, (offset - start) / (ends[wrap] - start)
    last = ends[-1]
    mean = max(1, last // len(ends))
    wrap = min(wraps - 1, len(ends) + (offset - last) // mean)
    start = last + (wrap - len(ends)) * mean
    return wrap, min(1.0, (offset - start) / mean)


def _along(offset: int, wrap: int, wrap_bytes: int) -> float:
    """:meth:`Profile.longitudinal` of *offset*, whose wrap is known."""
    along = min(1.0, (max(0, offset) - wrap * wrap_bytes) / wrap_bytes)
    return along if wrap % 2 == 0 else 1.0 - along

"""Drive and media timing profiles of the simulated library, and the cost model.

Figures come from reference.md section 4 (IBM/Oracle drive specifications) and section 1
(GridKa measurements); where a vendor gives none, the value is an estimate and says so.
All durations are seconds of simulated hardware time, before any ``time_scale``.
"""

from __future__ import annotations

import dataclasses
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
    #: Robot move of a cartridge between slot and drive (each way).
    robot_s: float
    load_s: float
    unload_s: float
    #: Fixed part of any locate (stop, reposition, start streaming again).
    locate_base_s: float
    #: Longitudinal travel from beginning to end of tape.
    locate_full_s: float
    #: Extra cost when the target lies on another wrap (serpentine track change).
    wrap_change_s: float
    #: Per-object overhead of the tape manager and drive (object header, filemark, backhitch).
    per_file_s: float
    #: Wraps on the medium; bytes fill wrap after wrap.
    wraps: int = 280
    #: Appended to the six-character volume serial, as in the library's barcodes.
    volume_suffix: str = ""
    description: str = ""

    def transfer_s(self, nbytes: int) -> float:
        return nbytes / (self.rate_mb_s * MB)

    def wrap_of(self, offset: int, capacity: int) -> int:
        if capacity <= 0:
            return 0
        return min(self.wraps - 1, max(0, offset) * self.wraps // capacity)

    def locate_s(self, head: int, target: int, capacity: int) -> float:
        """Seconds to move from byte *head* to byte *target*; 0 when already there."""
        if head == target:
            return 0.0
        span = max(capacity, 1)
        cost = self.locate_base_s + abs(target - head) / span * self.locate_full_s
        if self.wrap_of(head, capacity) != self.wrap_of(target, capacity):
            cost += self.wrap_change_s
        return cost

    def rewind_s(self, head: int, capacity: int) -> float:
        return self.locate_s(head, 0, capacity)

    def as_dict(self) -> dict[str, Any]:
        """Every parameter, for ``tssd simulate --list-profiles --json``."""
        return dataclasses.asdict(self)


# Average locate of the model for random positions is about
# locate_base + locate_full / 3 + wrap_change; the values below are chosen so that it
# matches the vendors' "avg locate" column.
LTO9 = Profile(
    name="lto9",
    rate_mb_s=400.0,
    capacity_bytes=18 * TB,
    robot_s=12.0,  # SL8500 rail: 10-15 s
    load_s=17.0,
    unload_s=30.0,
    locate_base_s=10.0,
    locate_full_s=96.0,  # 10 + 32 + 3 = 45 s average locate
    wrap_change_s=3.0,
    per_file_s=3.0,  # estimate; the GridKa-calibrated T10K figure below is 5 s
    wraps=280,
    volume_suffix="L9",
    description="IBM LTO-9 full height (TS4500 specification)",
)

LTO8 = Profile(
    name="lto8",
    rate_mb_s=360.0,
    capacity_bytes=12 * TB,
    robot_s=12.0,
    load_s=15.0,
    unload_s=24.0,
    locate_base_s=12.0,
    locate_full_s=132.0,  # 12 + 44 + 3 = 59 s average locate
    wrap_change_s=3.0,
    per_file_s=3.0,  # estimate
    wraps=208,
    volume_suffix="L8",
    description="IBM LTO-8 full height rate, half-height load/unload/locate figures",
)

# Calibrated on GridKa's figures (reference.md section 1, 2.0 GB average files):
# whole-tape recall ~150 MB/s per drive means 2000 MB / 250 MB/s + per_file = 13 s per
# file, so per_file is about 5 s. Individual files (~82 % of each tape) ran at ~130 MB/s:
# 15.4 s per file, i.e. ~2.4 s of locating per file; with ~18 % of reads needing one,
# each locate costs ~13 s, mostly the fixed part.
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
    per_file_s=5.0,
    wraps=200,  # estimate
    volume_suffix="",
    description="Oracle T10000D in an SL8500 as at GridKa, calibrated on CHEP 2019 figures",
)

PROFILES: dict[str, Profile] = {p.name: p for p in (LTO9, LTO8, GRIDKA_T10K)}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        valid = ", ".join(sorted(PROFILES))
        raise ConfigError(f"unknown sim.profile {name!r}: choose one of {valid}") from None

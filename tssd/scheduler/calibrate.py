"""A tape's estimated positions calibrated from the locate times its reads report.

Where positions are estimates (the media type's nominal geometry, each copy's offset the
sum of the sizes of the objects before it: what an IBM SP site knows), the true layout
differs from the estimate mostly by one factor per tape, the tape's compression and
rewritten data sets (``tssd/backends/sim/layout.py`` models that truth). A few per cent of
a cartridge is several wraps: a hop that the estimate puts on the neighbouring wrap,
right beside the head, may lie half a tape length away, so a tour planned on raw
estimates loses to position order (docs/benchmarks.md, "RAO on estimated geometry").

Every read reports how long its locate took (``ReadResult.locate_s``, which any backend
can time). The factors whose locate model explains those times are the ones still
plausible; a session plans its reads on them (:func:`tssd.scheduler.rao.order_reads`,
each hop the least on average over them) and plans again once they narrow.

What "explains" means comes from the layout's own noise: besides the tape's factor, each
object's bytes on tape vary by its own factor (``FILE_SPREAD``), so the true place of a
copy drifts from any one scaled estimate by a random walk, about ``FILE_SPREAD x
sqrt(offset x object size)`` bytes, and the true factor lies between two candidates.
A candidate explains a locate time if it is within what ``DEVIATIONS`` of that drift
and half a candidate step at the head and at the target move the modelled locate (the
travel, plus a wrap or band change where the interval straddles a boundary). The
evidence of a candidate is the sum of what each read leaves unexplained; the plausible
candidates are those with the least. One read from BOT times the longitudinal position
of its target to about a second, which leaves a few narrow *aliases* (the factors that
put the target a wrap further on, where a serpentine wrap comes back past the same
place): the plausible set is kept as the candidates themselves, not their range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tssd.tape.geometry import Profile

#: Candidate factors each side of 1 across the profile's ``position_spread``.
STEPS = 24
#: The per-object variation of bytes on tape a site assumes (standard deviation of each
#: object's own factor: headers, file mark, compressibility). An estimate with no vendor
#: figure, the same as the simulated layout's default (docs/benchmarks.md, noise model).
FILE_SPREAD = 0.02
#: Standard deviations of that drift a locate time may be off by and still be explained.
DEVIATIONS = 3.0
#: A factor stays plausible while its summed error is within this share of the best
#: one's plus ``SLACK_S`` seconds.
TOLERANCE = 0.5
SLACK_S = 2.0
#: Factors a plan averages over (evenly across the plausible candidates).
VIEWS = 5


class Calibration:
    """What a tape's reads have shown of its true scale (one per volume)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        spread = profile.position_spread
        count = STEPS if spread > 0 else 0
        self.step = spread / STEPS if spread > 0 else 0.0
        self.candidates = [1.0 + self.step * k for k in range(-count, count + 1)]
        self.error = [0.0] * len(self.candidates)
        self.evidence = 0
        self._kept: list[float] | None = None

    def observe(self, head: int, target: int, locate_s: float, object_size: int = 0) -> None:
        """A read whose locate from estimated offset *head* to *target* took *locate_s*;
        *object_size*: a typical size of the tape's objects (the drift's step)."""
        if head == target or len(self.candidates) == 1:
            return  # the next object on tape: no locate, whatever the scale
        p, capacity = self.profile, self.profile.capacity_bytes
        for i, f in enumerate(self.candidates):
            modelled = p.locate_s(int(head * f), int(target * f), capacity)
            self.error[i] += abs(modelled - locate_s)
        self.evidence += 1
        self._kept = None

    def tolerance(self, head: int, target: int, factor: float, object_size: int) -> float:
        """Seconds by which the locate head -> target may differ from its model at
        *factor* where *factor* is the tape's (see the module's docstring)."""
        p, capacity = self.profile, self.profile.capacity_bytes
        at_head = self._drift(head, object_size)
        at_target = self._drift(target, object_size)
        seconds = (at_head + at_target) * p.locate_full_s / p.wrap_bytes(capacity)
        h, t = head * factor, target * factor
        ends = ((int(h - at_head), int(h + at_head)), (int(t - at_target), int(t + at_target)))
        if any(p.wrap_of(a, capacity) != p.wrap_of(b, capacity) for a, b in ends):
            seconds += p.wrap_change_s
            if any(p.band_of(a, capacity) != p.band_of(b, capacity) for a, b in ends):
                seconds += p.band_change_s
        return seconds

    def _drift(self, offset: int, object_size: int) -> float:
        """Bytes by which the true place of *offset* may be off its scaled estimate."""
        walk = FILE_SPREAD * math.sqrt(max(0, offset) * max(0, object_size))
        return DEVIATIONS * walk + offset * self.step / 2

    def kept(self) -> list[float]:
        """The candidates the evidence so far leaves plausible (the least unexplained),
        in increasing order; possibly several narrow groups (aliases)."""
        if self._kept is None:
            self._kept = self._within(self.error)
        return self._kept

    def after(self, head: int, target: int, modelled: dict[float, float], seen: float) -> list[float]:
        """The factors that would stay plausible if the locate *head* -> *target* took
        *seen* seconds; *modelled*: its model time at each plausible factor."""
        kept = self.kept()
        index = {f: i for i, f in enumerate(self.candidates)}
        errors = [self.error[index[f]] + abs(modelled[f] - seen) for f in kept]
        bound = min(errors) * (1 + TOLERANCE) + SLACK_S
        return [f for f, e in zip(kept, errors, strict=True) if e <= bound]

    def _within(self, errors: Sequence[float]) -> list[float]:
        if self.evidence < 1:
            return list(self.candidates)
        bound = min(errors) * (1 + TOLERANCE) + SLACK_S
        return [f for f, e in zip(self.candidates, errors, strict=True) if e <= bound]

    def plausible(self) -> tuple[float, float]:
        """The lowest and highest factor the evidence so far leaves plausible."""
        kept = self.kept()
        return kept[0], kept[-1]

    def factors(self) -> tuple[float, ...]:
        """The factors to plan on: ``VIEWS`` of the plausible ones, evenly among them."""
        return spaced(self.kept(), VIEWS)

    def width(self) -> float:
        low, high = self.plausible()
        return high - low

    def share(self) -> float:
        """The plausible share of the candidates (1.0 before any evidence)."""
        return len(self.kept()) / len(self.candidates)


def spaced(values: Sequence[float], count: int) -> tuple[float, ...]:
    """At most *count* of *values* (sorted), evenly among them, the ends included."""
    if len(values) <= count:
        return tuple(values)
    last = len(values) - 1
    return tuple(values[round(k * last / (count - 1))] for k in range(count))

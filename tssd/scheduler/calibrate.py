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
each hop the least on average over them) and plans again once they narrow. The evidence
is the summed absolute error per candidate factor, O(candidates) per read.
"""

from __future__ import annotations

from tssd.tape.geometry import Profile

#: Candidate factors each side of 1 across the profile's ``position_spread``.
STEPS = 24
#: Reads with a locate before the evidence narrows the candidates.
MIN_EVIDENCE = 1
#: A factor stays plausible while its summed error is within this share of the best
#: one's plus ``SLACK_S`` seconds: what the per-file variation of the true layout (object
#: headers, compressibility) leaves unexplained by any one factor.
TOLERANCE = 0.5
SLACK_S = 2.0
#: Factors a plan averages over (evenly across the plausible range).
VIEWS = 5


class Calibration:
    """What a tape's reads have shown of its true scale (one per volume)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        spread = profile.position_spread
        count = STEPS if spread > 0 else 0
        step = spread / STEPS if spread > 0 else 0.0
        self.candidates = [1.0 + step * k for k in range(-count, count + 1)]
        self.error = [0.0] * len(self.candidates)
        self.evidence = 0

    def observe(self, head: int, target: int, locate_s: float) -> None:
        """A read whose locate from estimated offset *head* to *target* took *locate_s*."""
        if head == target or len(self.candidates) == 1:
            return  # the next object on tape: no locate, whatever the scale
        p, capacity = self.profile, self.profile.capacity_bytes
        for i, f in enumerate(self.candidates):
            modelled = p.locate_s(int(head * f), int(target * f), capacity)
            self.error[i] += abs(modelled - locate_s)
        self.evidence += 1

    def plausible(self) -> tuple[float, float]:
        """The lowest and highest factor the evidence so far leaves plausible."""
        if self.evidence < MIN_EVIDENCE:
            return self.candidates[0], self.candidates[-1]
        bound = min(self.error) * (1 + TOLERANCE) + SLACK_S
        kept = [f for f, e in zip(self.candidates, self.error, strict=True) if e <= bound]
        return min(kept), max(kept)

    def factors(self) -> tuple[float, ...]:
        """The factors to plan on: ``VIEWS`` of them across the plausible range."""
        low, high = self.plausible()
        if high <= low:
            return (low,)
        return tuple(low + (high - low) * k / (VIEWS - 1) for k in range(VIEWS))

    def width(self) -> float:
        low, high = self.plausible()
        return high - low

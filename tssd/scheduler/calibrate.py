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

The evidence of a factor is the summed absolute difference between its modelled and the
measured locate times; the factors within ``TOLERANCE`` of the best one's plus
``SLACK_S`` stay plausible (what the per-file variation of the true layout leaves
unexplained by any one factor: on a dense tape it keeps a few candidates around the best,
over which a tour is robust). One read from BOT times the longitudinal position of its
target to about a second, which leaves a few narrow *aliases* (the factors that put the
target a wrap further on, where a serpentine wrap comes back past the same place): the
plausible set is kept as the candidates themselves, not their range.

The candidates span ``1 +- position_spread``, what is assumed of any nominal geometry;
no site can know its tapes stay within it. When an outermost candidate explains the
evidence strictly best, the truth may lie beyond it: ``WIDEN_STEPS`` candidates are added
on that side (their errors from every locate seen, the first ``MEMORY`` of them), as
often as that stays so, up to ``WIDEST`` times the spread. A tape 5 % off planned
within 3 % loses to position order (its tours lean on neighbouring runs a wrap away:
gridka-t10k at a true ``sim.layout_spread`` of 0.05 located 7 % more than position order
before this; with the widening 19 % less, docs/benchmarks.md). Within the spread nothing
changes (an inner candidate explains best, or an outermost one only ties). Where even
the widest candidate is the best one, ``beyond``: the tape's reads are ordered by
position until the evidence is inside (``reads.py``). Beyond the widest the errors alias
(a factor wrong by a whole wrap length may fit a locate as well as a near one), so that
detection is not guaranteed; 9 % off is far outside what compressing already-compressed
data gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from tssd.tape.geometry import Profile

#: Candidate factors each side of 1 across the profile's ``position_spread``.
STEPS = 24
#: A factor stays plausible while its summed error is within this share of the best
#: one's plus ``SLACK_S`` seconds. (Read as a per-read tolerance from the noise model
#: instead, three standard deviations of each copy's drift, the plausible set of a dense
#: tape narrowed to a single factor and its tours lost what they save: docs/benchmarks.md.)
TOLERANCE = 0.5
SLACK_S = 2.0
#: Factors a plan averages over (evenly across the plausible candidates).
VIEWS = 5
#: Candidates added at a time on the side where the best factor is the outermost one.
WIDEN_STEPS = STEPS // 2
#: The candidates may reach this many times ``position_spread`` from 1; a tape whose best
#: factor is the outermost even then is read in position order (``beyond``).
WIDEST = 3
#: Locates kept to cost added candidates; a tape with more evidence than this has shown
#: where it lies long before, and its candidates no longer widen (bounded memory).
MEMORY = 2048


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
        #: Every locate seen (estimated head, estimated target, seconds): the evidence
        #: of candidates added later.
        self._seen: list[tuple[int, int, float]] = []
        self._widest = WIDEST * STEPS

    def observe(self, head: int, target: int, locate_s: float) -> None:
        """A read whose locate from estimated offset *head* to *target* took *locate_s*."""
        if head == target or len(self.candidates) == 1:
            return  # the next object on tape: no locate, whatever the scale
        p, capacity = self.profile, self.profile.capacity_bytes
        for i, f in enumerate(self.candidates):
            modelled = p.locate_s(int(head * f), int(target * f), capacity)
            self.error[i] += abs(modelled - locate_s)
        self.evidence += 1
        if self.evidence <= MEMORY:
            self._seen.append((head, target, locate_s))
        else:
            self._seen.clear()
        self._kept = None
        self._widen()

    def _edge(self) -> int:
        """-1 or +1 where an outermost candidate explains the evidence strictly best (the
        truth may lie beyond it), else 0."""
        error = self.error
        if error[0] < min(error[1:]):
            return -1
        if error[-1] < min(error[:-1]):
            return 1
        return 0

    def _widen(self) -> None:
        """Add candidates beyond an outermost one that explains the evidence best, up to
        ``WIDEST`` times the spread, their errors from every locate seen so far."""
        side = self._edge()
        while side and self._room(side):
            outer = round((self.candidates[0 if side < 0 else -1] - 1.0) / self.step)
            limit = -self._widest if side < 0 else self._widest
            count = min(WIDEN_STEPS, abs(limit - outer))
            new = [1.0 + self.step * (outer + side * k) for k in range(1, count + 1)]
            errors = [self._error_of(f) for f in new]
            if side < 0:
                self.candidates[:0] = new[::-1]
                self.error[:0] = errors[::-1]
            else:
                self.candidates.extend(new)
                self.error.extend(errors)
            self._kept = None
            side = self._edge()

    def _room(self, side: int) -> bool:
        outer = round((self.candidates[0 if side < 0 else -1] - 1.0) / self.step)
        if self.evidence > MEMORY:
            return False
        return abs(outer) < self._widest and 1.0 + self.step * (outer + side) > 0

    def _error_of(self, factor: float) -> float:
        p, capacity = self.profile, self.profile.capacity_bytes
        return sum(
            abs(p.locate_s(int(h * factor), int(t * factor), capacity) - s)
            for h, t, s in self._seen
        )

    def beyond(self) -> bool:
        """Whether the evidence points beyond the widest candidates it can have (``WIDEST``
        times the spread, or those it had when its ``MEMORY`` filled): the estimate is
        not to be planned on (position order barely depends on it)."""
        return bool(self._edge())

    def kept(self) -> list[float]:
        """The candidates the evidence so far leaves plausible, in increasing order;
        possibly several narrow groups (aliases)."""
        if self._kept is None:
            self._kept = self._within(self.error)
        return self._kept

    def after(
        self, head: int, target: int, modelled: dict[float, float], seen: float
    ) -> list[float]:
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
        """The factors a tour plans on: ``VIEWS`` of them across the plausible range (a
        long batch's tour stays robust over the gaps between aliases too; the lookahead
        of a small batch uses the candidates themselves, ``kept``)."""
        low, high = self.plausible()
        if high <= low:
            return (low,)
        return tuple(low + (high - low) * k / (VIEWS - 1) for k in range(VIEWS))

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

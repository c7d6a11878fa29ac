"""The next read of a small batch on estimated positions, chosen for what it will teach.

A batch of a few files (a sparse recall: five files on a tape) is over before the tape's
calibration (``calibrate.py``) has narrowed: the robust tour (``rao.robust_tour``) plans
as if nothing would be learnt on the way and prefers hops whose cost the plausible
factors agree on. But the first locate from BOT times its target's longitudinal
position to about a second, which pins the tape's factor down to a few narrow aliases,
and the rest of the batch is planned again on that.

So each read of a small batch is chosen by looking one read ahead: for each run that
could come next and each hypothesis (a plausible factor taken as the truth), the locate
to it, then the factors that locate's time would leave plausible, then the robust tour
of the rest planned on those, costed on the hypothesis. The next read is the run with
the least mean over the hypotheses: a cheap hop that also tells which way the rest lies.
"""

from __future__ import annotations

from collections.abc import Sequence

from tssd.scheduler.calibrate import VIEWS, Calibration, spaced
from tssd.scheduler.rao import _runs, _scaled, locate_total, robust_tour

#: Batches of at most this many runs are read one lookahead choice at a time (the
#: choice costs about runs^2 x HYPOTHESES small tours).
MAX_RUNS = 8
#: Plausible factors taken in turn as the truth.
HYPOTHESES = 25


def small(spans: Sequence[tuple[int, int]]) -> bool:
    """Whether a batch of *spans* (in position order) is read by lookahead."""
    return 1 < len(_runs(spans)) <= MAX_RUNS


def next_read(spans: Sequence[tuple[int, int]], head: int, calibration: Calibration) -> int:
    """The index of the span of *spans* (offset, size, in position order) to read next
    from estimated offset *head*: the first of the run with the least expected locating,
    this hop and the rest after what its locate time would show (module docstring)."""
    profile, capacity = calibration.profile, calibration.profile.capacity_bytes
    runs = _runs(spans)
    kept = calibration.kept()
    truths = spaced(kept, HYPOTHESES)
    best, choice = float("inf"), runs[0].first
    for run in runs:
        rest = [spans[i] for r in runs if r is not run for i in range(r.first, r.stop)]
        modelled = {f: profile.locate_s(int(head * f), int(run.start * f), capacity) for f in kept}
        total = 0.0
        for truth in truths:
            total += modelled[truth]
            if not rest:
                continue
            seen = modelled[truth]
            after = calibration.after(head, run.start, modelled, seen)
            order = robust_tour(rest, run.end, profile, spaced(after, VIEWS))
            scaled = _scaled([rest[i] for i in order], truth)
            total += locate_total(scaled, int(run.end * truth), profile)
            if total >= best * len(truths):
                break  # already dearer than the best run
        if total < best * len(truths):
            best, choice = total / len(truths), run.first
    return choice

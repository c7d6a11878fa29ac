"""The next read of a small batch on estimated positions, chosen for what it will teach.

A batch of a few files (a sparse recall: five files on a tape) is over before the tape's
calibration (``calibrate.py``) has narrowed: the robust tour (``rao.robust_tour``) plans
as if nothing would be learnt on the way and prefers hops whose cost the plausible
factors agree on. But the first locate from BOT times its target's longitudinal
position to about a second, which pins the tape's factor down to a few narrow aliases,
and the rest of the batch is planned again on that.

A batch of at most ``EXACT_RUNS`` runs is planned to its end (``exact_next``): each
candidate factor is a hypothesis of the truth, weighted by how well it explains the
tape's few locates so far (``likelihoods``: ``exp(-error / LIKELIHOOD_S)``, the error the
calibration's summed absolute seconds; equal weights before the first read; past
``FEW_READS`` locates the calibration's plausible set, equally likely); a read's
locate time leaves plausible the hypotheses whose model time falls in the same
``SLACK_S``-wide bin as the one the truth gives (``observe``: the calibration's
resolution); the expected locating of every order of reads, each next read chosen on
what the reads before it would have shown, is minimised by a search over (head, runs
left, plausible hypotheses), memoised. That is the Bayes-optimal order under this
observation model; its cost is bounded by the batch (5 runs: at most 5! orders) and by
how few distinct plausible sets the hypotheses give.

A larger small batch (up to ``MAX_RUNS``) looks one read ahead: for each run that could
come next and each hypothesis, the locate to it, then the factors that locate's time
would leave plausible, then the robust tour of the rest planned on those, costed on the
hypothesis; the next read is the run with the least mean over the hypotheses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache

from tssd.scheduler.calibrate import SLACK_S, STEPS, VIEWS, Calibration, spaced
from tssd.scheduler.rao import _Run, _runs, _scaled, locate_total, robust_tour
from tssd.tape.geometry import Profile

#: Batches of at most this many runs are read one lookahead choice at a time (the
#: choice costs about runs^2 x HYPOTHESES small tours).
MAX_RUNS = 8
#: Plausible factors taken in turn as the truth.
HYPOTHESES = 25
#: Batches of at most this many runs are planned to their end (``exact_next``), over
#: every plausible candidate of the assumed spread (``2 * STEPS + 1``; a widened
#: calibration's are taken evenly among them).
EXACT_RUNS = 5
EXACT_HYPOTHESES = 2 * STEPS + 1
#: The seconds of a locate that no factor explains (a copy's own drift: one read from BOT
#: times its target to about a second), the scale of a hypothesis' likelihood. Measured
#: among 0.25-4 s on the sparse campaigns of seeds 1-8 and checked on seeds 9-16
#: (docs/benchmarks.md, "Tenth round, sparse").
LIKELIHOOD_S = 1.0
#: Hypotheses less likely than this share of the likeliest are left out of the plan.
LEAST_LIKELY = 1e-3
#: A tape that has shown at most this many locates is planned on likelihoods; past them
#: the summed error is mostly the drift that neighbouring copies share, not independent
#: seconds, and a likelihood from it trusts one factor (a dense tape's tail: the
#: calibration's plausible set, equally likely, as before).
FEW_READS = MAX_RUNS


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
    if len(runs) <= EXACT_RUNS:
        if calibration.evidence > FEW_READS:
            return exact_next(runs, head, profile, spaced(kept, EXACT_HYPOTHESES))
        weights = likelihoods(calibration)
        truths = spaced(list(weights), EXACT_HYPOTHESES)
        return exact_next(runs, head, profile, truths, weights)
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


def likelihoods(calibration: Calibration) -> dict[float, float]:
    """The candidates of *calibration* worth planning on, in increasing order, each with
    its likelihood relative to the likeliest (1.0 each before any evidence)."""
    errors = dict(zip(calibration.candidates, calibration.error, strict=True))
    least = min(errors.values())
    weights = {f: math.exp((least - e) / LIKELIHOOD_S) for f, e in errors.items()}
    return {f: w for f, w in weights.items() if w >= LEAST_LIKELY}


def exact_next(
    runs: Sequence[_Run],
    head: int,
    profile: Profile,
    truths: Sequence[float],
    weights: Mapping[float, float] | None = None,
) -> int:
    """The first span of the run of *runs* to read next from estimated offset *head*:
    the least expected locating to the end of the batch over *truths* (each as likely as
    its *weight*, else equally), the rest planned again on what each read's time would
    leave plausible (``observe``; module docstring)."""
    return runs[expected(runs, head, profile, truths, weights)[1]].first


def expected(
    runs: Sequence[_Run],
    head: int,
    profile: Profile,
    truths: Sequence[float],
    weights: Mapping[float, float] | None = None,
) -> tuple[float, int]:
    """(The expected locate seconds of reading *runs* from *head* in the best adaptive
    order over *truths*, each as likely as its weight (default equally), the index of the
    run to read first)."""
    capacity = profile.capacity_bytes
    starts = tuple(r.start for r in runs)
    ends = tuple(r.end for r in runs)
    weight = {f: 1.0 for f in truths} if weights is None else {f: weights[f] for f in truths}

    def mass(group: Sequence[float]) -> float:
        return sum(weight[f] for f in group)

    @cache
    def value(at: int, rest: frozenset[int], group: tuple[float, ...]) -> tuple[float, int]:
        best, choice, whole = float("inf"), -1, mass(group)
        for r in sorted(rest):
            times = {f: profile.locate_s(int(at * f), int(starts[r] * f), capacity) for f in group}
            total = sum(t * weight[f] for f, t in times.items())
            left = rest - {r}
            if left:
                for part in observe(times):
                    total += value(ends[r], left, part)[0] * mass(part)
                    if total >= best * whole:
                        break  # already dearer than the best run
            if total < best * whole:
                best, choice = total / whole, r
        return best, choice

    return value(head, frozenset(range(len(runs))), tuple(truths))


def observe(times: dict[float, float]) -> list[tuple[float, ...]]:
    """The hypotheses a locate's time cannot tell apart, in groups: those whose model
    time (*times*) falls in the same ``SLACK_S``-wide bin (what a copy's own drift leaves
    unexplained, as in the calibration). The bins partition the hypotheses, so the
    plan's expectation is a true one: an adaptive order costs no more than the best fixed
    order, and no less than knowing the truth (the unit tests)."""
    bins: dict[int, list[float]] = {}
    for f, t in times.items():
        bins.setdefault(int(t // SLACK_S), []).append(f)
    return [tuple(b) for b in bins.values()]

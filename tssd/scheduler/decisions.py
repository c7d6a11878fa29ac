"""The decision metric: seconds from a drive freeing up to the end of the scheduling pass
that decided its next mount (``tssd_schedule_decision_seconds``, issue 22), and the log
of a slow one with where its time went (``scheduler.decision_slow``)."""

from __future__ import annotations

import itertools
import time

import structlog
from prometheus_client import Histogram

log = structlog.get_logger()
#: A decision slower than this is logged with the steps of its pass: the goal at a
#: million pending recalls is 50 ms at p99 (issue 22).
DECISION_SLOW_S = 0.05


class Decisions:
    """Freed drives and the pass that decides them.

    A drive freed before a pass began is decided by that pass; one freed during a pass
    but before its assignment step (:meth:`deciding`) too, since that step reads the free
    drives; one freed later by the next pass.
    """

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        #: perf_counter() of each drive freed and not yet given to a pass.
        self.freed: list[float] = []
        self._mine: list[float] = []
        self._marks: dict[str, float] = {}
        self._cpu0 = 0.0

    def drive_freed(self) -> None:
        self.freed.append(time.perf_counter())

    def pass_begins(self) -> None:
        self._mine, self.freed = self.freed, []
        self._marks, self._cpu0 = {"start": time.perf_counter()}, time.thread_time()

    def deciding(self) -> None:
        """The pass's assignment step begins: the drives freed so far are its own."""
        self._mine += self.freed
        self.freed = []

    def mark(self, step: str) -> None:
        """The pass finished *step* (the log's ``<step>_ms``)."""
        self._marks[step] = time.perf_counter()

    def pass_ends(self, *, full: bool, scored: int) -> None:
        done = time.perf_counter()
        mine, self._mine = self._mine, []
        for at in mine:
            self.histogram.observe(done - at)
        if mine and done - min(mine) > DECISION_SLOW_S:
            self._log_slow(min(mine), done, full, scored)

    def _log_slow(self, freed_at: float, done: float, full: bool, scored: int) -> None:
        """Where a slow decision's time went: before its pass began (the pass running
        when the drive freed up, the loop's other work; negative: freed during the pass),
        then each step of its pass, and the loop thread's CPU during the pass (much less
        than ``pass_ms``: the process waited for a core)."""
        marks = sorted(self._marks.items(), key=lambda m: m[1])
        steps = {
            f"{step}_ms": round((at - before) * 1000, 1)
            for (_, before), (step, at) in itertools.pairwise(marks)
        }
        log.warning(
            "scheduler.decision_slow", seconds=round(done - freed_at, 3),
            before_pass_ms=round((marks[0][1] - freed_at) * 1000, 1),
            pass_ms=round((done - marks[0][1]) * 1000, 1), full=full,
            cpu_ms=round((time.thread_time() - self._cpu0) * 1000, 1), scored=scored,
            **steps,
        )  # fmt: skip

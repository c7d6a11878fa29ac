"""The reads of one batch, in an order planned on what the tape has shown so far.

Without a timing model, with ``rao = "off"``, or where the backend's positions are exact
(``position_spread`` 0), the batch is ordered once (:func:`rao.order_reads`). Where they
are estimates, each read's locate time calibrates the tape (``calibrate.py``): once the
plausible scales have narrowed to half of what the current order was planned on, or
``REPLAN_EVERY`` reads after it, the rest of the batch is ordered again on them. A small
batch (``lookahead.MAX_RUNS`` runs, no higher-priority files) is planned again after
every read, its next read chosen for what its locate time will show (``lookahead.py``).
A tape whose locate times are best explained by a factor beyond even the widest
candidates (``Calibration.beyond``) is read in position order until they are not.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence

from tssd.backends.base import ReadItem, ReadResult, TapeBackend
from tssd.clock import Offload
from tssd.scheduler.calibrate import Calibration
from tssd.scheduler.drives import DriveState
from tssd.scheduler.lookahead import next_read, small
from tssd.scheduler.rao import OFFLOAD_ABOVE, order_reads
from tssd.tape.geometry import Profile

#: Reads after which the rest of a batch is planned again even if the scale did not narrow.
REPLAN_EVERY = 128
#: Tapes whose calibration is kept (the factor is the tape's own: it holds across mounts).
KEEP_TAPES = 4096


class PlannedReads:
    """Orders and reads the batches of the runner's sessions, calibrating each tape."""

    def __init__(self, backend: TapeBackend, offload: Offload, mode: str) -> None:
        self.backend = backend
        self.offload = offload
        self.mode = mode
        self._calibrations: OrderedDict[str, Calibration] = OrderedDict()

    def calibration(self, volume: str, layout: Profile | None) -> Calibration | None:
        """*volume*'s calibration, None where there is nothing to calibrate."""
        if layout is None or layout.position_spread <= 0 or self.mode != "auto":
            return None
        known = self._calibrations.get(volume)
        if known is None or known.profile != layout:
            known = self._calibrations[volume] = Calibration(layout)
        self._calibrations.move_to_end(volume)
        while len(self._calibrations) > KEEP_TAPES:
            self._calibrations.popitem(last=False)
        return known

    async def read(
        self,
        drive: DriveState,
        volume: str,
        layout: Profile | None,
        batch: Sequence[ReadItem],
        urgent: Mapping[int, float],
        now: Callable[[], float] | None = None,
    ) -> AsyncGenerator[ReadResult, None]:
        """Results of reading *batch* on *drive*, one per item as the backend yields them.

        *urgent*: seconds from the start of the batch within which each such item should
        be read; with the clock *now*, a new plan gives each what is left of it (else every
        new plan granted the whole time again, and a file could slide to the batch's end).

        ``drive.head_offset`` is the caller's to move after each result (it is read here
        before the next one, as the estimated place of the head). A caller that may stop
        early reads it under ``contextlib.aclosing`` so the backend's read ends at once."""
        calibration = self.calibration(volume, layout)
        remaining = list(batch)
        began = now() if now is not None else 0.0
        deadlines = urgent
        while remaining:
            if now is not None and deadlines:
                spent = now() - began
                urgent = {k: max(0.0, v - spent) for k, v in deadlines.items()}
            factors = calibration.factors() if calibration is not None else None
            planned = calibration.width() if calibration is not None else 0.0
            lost = calibration is not None and calibration.beyond()
            items = await self._order(remaining, drive, layout, urgent, factors, not lost)
            step = calibration is not None and not lost and _stepwise(remaining, urgent)
            if step:
                assert calibration is not None
                items = _lookahead_first(items, drive.head_offset, calibration)
            done: set[int] = set()
            results = self.backend.read(drive.name, items)
            try:
                async for result in results:
                    done.add(id(result.item))
                    if calibration is not None and result.error is None:
                        calibration.observe(
                            drive.head_offset, result.item.copy.offset, result.locate_s
                        )
                    yield result
                    if step or (
                        calibration is not None and _replan(calibration, planned, lost, len(done))
                    ):
                        break
            finally:
                # Stopped early (a new plan, or the caller's interrupt): end the backend's
                # read now rather than whenever the generator is collected.
                close = getattr(results, "aclose", None)
                if close is not None:
                    await close()
            remaining = [i for i in remaining if id(i) not in done]

    async def _order(
        self,
        items: Sequence[ReadItem],
        drive: DriveState,
        layout: Profile | None,
        urgent: Mapping[int, float],
        factors: Sequence[float] | None,
        tour: bool,
    ) -> list[ReadItem]:
        def order() -> list[ReadItem]:
            return order_reads(
                items, drive, layout, self.mode, urgent=urgent, factors=factors, tour=tour
            )

        return await self.offload(order) if len(items) > OFFLOAD_ABOVE else order()


def _replan(calibration: Calibration, planned: float, lost: bool, reads: int) -> bool:
    """Whether the rest of the batch is planned again: the plausible range has halved,
    the evidence has left (or come back inside) the widest candidates, or every
    ``REPLAN_EVERY`` reads."""
    if calibration.beyond() != lost:
        return True
    narrowed = planned > 0 and calibration.width() <= planned / 2
    return narrowed or reads >= REPLAN_EVERY


def _stepwise(items: Sequence[ReadItem], urgent: Mapping[int, float]) -> bool:
    """Whether *items* are read one lookahead choice at a time (a small batch of one
    priority: higher-priority files join a tour where their deadline allows, rao.py)."""
    if any(id(i) in urgent for i in items):
        return False
    return small(sorted((i.copy.offset, i.copy.size) for i in items))


def _lookahead_first(
    items: Sequence[ReadItem], head: int, calibration: Calibration
) -> list[ReadItem]:
    """*items* (planned) with the lookahead's choice first, the rest as planned."""
    ordered = sorted(items, key=lambda i: i.copy.offset)
    spans = [(i.copy.offset, i.copy.size) for i in ordered]
    first = ordered[next_read(spans, head, calibration)]
    return [first, *(i for i in items if i is not first)]

"""The figures behind the database gauges (:mod:`tssd.metrics_db`):
:class:`tssd.ports.reports.Gauges` in SQL."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from tssd.db.counts import Counts
from tssd.db.engine import Sessions
from tssd.db.models import Mount, QueueRow


class GaugeStore:
    """Pause flags and per-tape mounts read in one session; queue ages from the counts."""

    def __init__(self, sessions: Sessions, tally: Counts | None = None) -> None:
        self.sessions = sessions
        #: The daemon's shared counts: no walk of a million queued requests every round.
        self.tally = tally if tally is not None else Counts(sessions)

    async def pauses_and_mounts(self, since: datetime) -> tuple[dict[str, bool], list[int]]:
        """Each queue's pause flag, and the mounts of each tape requested since *since*."""
        per_tape = (
            select(Mount.volume, func.count())
            .where(Mount.requested_at >= since)
            .group_by(Mount.volume)
        )
        async with self.sessions() as session:
            paused = {q.name: q.paused for q in (await session.scalars(select(QueueRow))).all()}
            mounts = [n for _, n in (await session.execute(per_tape)).all()]
        return paused, mounts

    async def oldest_queued(self) -> dict[str, datetime]:
        ages: dict[str, datetime] = {}
        for g in await self.tally.get():
            stamp = g.oldest
            if g.state == "queued" and stamp is not None:
                ages[g.queue] = min(stamp, ages.get(g.queue, stamp))
        return ages

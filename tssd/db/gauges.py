"""The figures behind the database gauges (:mod:`tssd.metrics_db`), read in one session."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from tssd.db.engine import Sessions
from tssd.db.models import Mount, QueueRow


async def pauses_and_mounts(
    sessions: Sessions, since: datetime
) -> tuple[dict[str, bool], list[int]]:
    """Each queue's pause flag, and the mounts of each tape requested since *since*."""
    per_tape = (
        select(Mount.volume, func.count()).where(Mount.requested_at >= since).group_by(Mount.volume)
    )
    async with sessions() as session:
        paused = {q.name: q.paused for q in (await session.scalars(select(QueueRow))).all()}
        mounts = [n for _, n in (await session.execute(per_tape)).all()]
    return paused, mounts

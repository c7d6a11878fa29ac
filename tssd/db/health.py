"""Verdicts on faulty hardware, written down: drives taken out of service, suspect tapes.

:mod:`tssd.health` counts the failures and decides; :class:`SqlHealth` (the
:class:`~tssd.ports.health.HealthBook` of a database) writes its verdicts, one
transaction each.
"""

from __future__ import annotations

from sqlalchemy import update

from tssd.db.engine import Sessions
from tssd.db.models import Drive, Tape, utcnow


class SqlHealth:
    """Drives disabled and tapes marked suspect in the ``drives`` and ``tapes`` rows."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    async def disable_drive(self, name: str) -> None:
        async with self.sessions.begin() as session:
            await session.execute(
                update(Drive).where(Drive.name == name).values(enabled=False, updated_at=utcnow())
            )

    async def mark_tape_suspect(self, volume: str) -> None:
        async with self.sessions.begin() as session:
            tape = await session.get(Tape, volume)
            if tape is None:
                session.add(Tape(volume=volume, state="suspect"))
            else:
                tape.state = "suspect"

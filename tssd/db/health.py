"""Verdicts on faulty hardware, written down: drives taken out of service, suspect tapes.

:mod:`tssd.health` counts the failures and decides; these write its verdicts, one
transaction each.
"""

from __future__ import annotations

from sqlalchemy import update

from tssd.db.engine import Sessions
from tssd.db.models import Drive, Tape, utcnow


async def disable_drive(sessions: Sessions, name: str) -> None:
    """Take drive *name* out of service until an operator enables it again."""
    async with sessions.begin() as session:
        await session.execute(
            update(Drive).where(Drive.name == name).values(enabled=False, updated_at=utcnow())
        )


async def mark_tape_suspect(sessions: Sessions, volume: str) -> None:
    """Mark *volume* suspect, creating its tape row if it has none yet."""
    async with sessions.begin() as session:
        tape = await session.get(Tape, volume)
        if tape is None:
            session.add(Tape(volume=volume, state="suspect"))
        else:
            tape.state = "suspect"

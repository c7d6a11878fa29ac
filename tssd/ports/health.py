"""Verdicts on faulty hardware, written down: drives taken out of service, suspect tapes.

:mod:`tssd.health` counts the failures and decides; a :class:`HealthBook` records its
verdicts, where the operator's views and the scheduler's next start read them.
Implementations: :class:`tssd.db.health.SqlHealth` and
:class:`tssd.db.memory_health.MemoryHealth` (``tests/integration/test_health_contract.py``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class HealthBook(Protocol):
    """Where drives leave service and tapes become suspect; each call one transaction."""

    async def disable_drive(self, name: str) -> None:
        """Take the known drive *name* out of service until an operator enables it again
        (an unknown name changes nothing)."""
        ...

    async def mark_tape_suspect(self, volume: str) -> None:
        """Mark *volume* suspect, recording the tape if it was not known yet."""
        ...

"""Health verdicts in memory: the :class:`~tssd.ports.health.HealthBook` of the memory store.

A disabled drive is disabled in its :class:`~tssd.db.memory_mounts.MemoryMounts` (what
``reset_drives`` reports at the next start); the mounts keep no tape states, so the
suspect tapes are kept here, as the ``tapes`` rows would keep them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tssd.db.memory_mounts import MemoryMounts
from tssd.ports.health import HealthBook


class MemoryHealth:
    """Drives disabled in *mounts*; tape states in :attr:`tapes`."""

    def __init__(self, mounts: MemoryMounts | None = None) -> None:
        self.mounts = mounts if mounts is not None else MemoryMounts()
        #: Each recorded tape's state (``suspect``), by volume.
        self.tapes: dict[str, str] = {}

    async def disable_drive(self, name: str) -> None:
        if name in self.mounts.enabled:
            self.mounts.enabled[name] = False

    async def mark_tape_suspect(self, volume: str) -> None:
        self.tapes[volume] = "suspect"


if TYPE_CHECKING:
    from tssd.db.health import SqlHealth

    def _conforms(memory: MemoryHealth, sql: SqlHealth) -> None:
        """For mypy: both books have the port's signatures."""
        books: list[HealthBook] = [memory, sql]
        del books

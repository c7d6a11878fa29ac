"""The drive and mount bookkeeping of :class:`tssd.db.mounts.MountStore`, in memory.

For the scheduler on :class:`tssd.db.memory.MemoryStore` (tests that need no SQL): the
same calls, the mount history kept in a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tssd.db.models import utcnow
from tssd.db.mounts import DriveInfo
from tssd.domain import Kind


@dataclass
class MountRow:
    id: int
    drive: str
    volume: str
    purpose: str
    requested_at: datetime
    ready_at: datetime | None = None
    dismounted_at: datetime | None = None
    files: int = 0
    nbytes: int = 0
    transfer_s: float = 0.0


class MemoryMounts:
    """What each drive holds, every mount, and each tape's mount count."""

    def __init__(self) -> None:
        self.mounts: list[MountRow] = []
        self.holding: dict[str, str | None] = {}
        self.enabled: dict[str, bool] = {}
        self.tape_mounts: dict[str, int] = {}

    async def reset_drives(self, infos: Sequence[DriveInfo], scope: Any) -> dict[str, bool]:
        """Close the mounts left open; record what each drive holds now (*scope* is the
        cluster's: one process owns all of a memory store)."""
        now = utcnow()
        for row in self.mounts:
            if row.dismounted_at is None:
                row.dismounted_at = now
        enabled = dict(self.enabled)
        for info in infos:
            self.enabled.setdefault(info.name, True)
            self.holding[info.name] = info.volume
        return enabled

    async def open_mount(self, drive: str, volume: str, purpose: Kind) -> int:
        self.mounts.append(MountRow(len(self.mounts) + 1, drive, volume, purpose, utcnow()))
        return len(self.mounts)

    async def mounted(self, drive: str, volume: str, mount_id: int) -> None:
        self.mounts[mount_id - 1].ready_at = utcnow()
        self.holding[drive] = volume
        self.tape_mounts[volume] = self.tape_mounts.get(volume, 0) + 1

    async def mount_failed(self, drive: str, mount_id: int) -> None:
        self.mounts[mount_id - 1].dismounted_at = utcnow()
        self.holding[drive] = None

    async def save_stats(self, mount_id: int, files: int, nbytes: int, transfer_s: float) -> None:
        row = self.mounts[mount_id - 1]
        row.files, row.nbytes, row.transfer_s = files, nbytes, transfer_s

    async def close_mount(
        self,
        drive: str,
        mount_id: int | None,
        at: datetime,
        *,
        files: int,
        nbytes: int,
        transfer_s: float,
    ) -> None:
        if mount_id is not None:
            row = self.mounts[mount_id - 1]
            row.dismounted_at, row.files, row.nbytes, row.transfer_s = at, files, nbytes, transfer_s
        self.holding[drive] = None

    async def requested_since(self, since: datetime) -> list[tuple[str, datetime]]:
        return [(m.volume, m.requested_at) for m in self.mounts if m.requested_at >= since]

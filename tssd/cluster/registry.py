"""The ``instances``: who shares the database, and since when each was last heard.

Heartbeats are written and compared in the book's time (the database server's ``now()``),
so the clocks of the tape servers never matter for deciding that an instance is dead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from tssd.ports.cluster import LIVE, REAPED, STOPPED, ClusterBook, Member

__all__ = ["LIVE", "REAPED", "STOPPED", "Registry"]


class Registry:
    """This instance's row and the view of all the others."""

    def __init__(self, book: ClusterBook, instance: str, host: str, lease_s: float) -> None:
        self.book = book
        self.instance = instance
        self.host = host
        self.lease = timedelta(seconds=lease_s)

    async def register(self, drives: Sequence[str]) -> None:
        """Become live and take the rows of this host's drives; refuse a duplicate."""
        await self.book.register(
            self.instance, self.host, os.getpid(), self.lease, drives, alive=_pid_alive
        )

    async def renew(self) -> bool:
        """Renew the heartbeat; False if this instance was reaped (its lease is lost)."""
        return await self.book.renew(self.instance)

    async def others_live(self) -> bool:
        """Whether another instance shares the database right now."""
        return await self.book.others_live(self.instance, self.lease)

    async def stopped(self) -> None:
        """A clean stop: nothing of ours is left to reap."""
        await self.book.mark_stopped(self.instance)

    async def view(self) -> list[dict[str, Any]]:
        """Every instance with its state, heartbeat age and drives (``tssctl status``)."""
        roster = await self.book.roster()
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for d in roster.drives:
            entry = {"name": d.name, "state": d.state, "volume": d.volume}
            by_owner.setdefault(d.instance or "", []).append(entry)
        return [self._entry(m, by_owner.get(m.instance.id, [])) for m in roster.members]

    def _entry(self, member: Member, drives: list[dict[str, Any]]) -> dict[str, Any]:
        inst = member.instance
        return {
            "id": inst.id,
            "host": inst.host,
            "pid": inst.pid,
            "state": inst.state,
            "self": inst.id == self.instance,
            "started_at": inst.started_at.isoformat(),
            "heartbeat_at": inst.heartbeat_at.isoformat(),
            "heartbeat_age_s": round(member.heartbeat_age_s, 3),
            "drives": drives,
        }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

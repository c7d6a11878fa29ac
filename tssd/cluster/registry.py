"""The ``instances`` table: who shares the database, and since when each was last heard.

Heartbeats are written and compared in the database server's time (``now()``), so the
clocks of the tape servers never matter for deciding that an instance is dead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from tssd.db import cluster as db
from tssd.db.cluster import LIVE, REAPED, STOPPED
from tssd.db.engine import Sessions

__all__ = ["LIVE", "REAPED", "STOPPED", "Registry"]


class Registry:
    """This instance's row and the view of all the others."""

    def __init__(self, sessions: Sessions, instance: str, host: str, lease_s: float) -> None:
        self.sessions = sessions
        self.instance = instance
        self.host = host
        self.lease = timedelta(seconds=lease_s)

    async def register(self, drives: Sequence[str]) -> None:
        """Become live and take the rows of this host's drives; refuse a duplicate."""
        await db.register_instance(
            self.sessions, self.instance, self.host, os.getpid(), self.lease, drives,
            alive=_pid_alive,
        )  # fmt: skip

    async def renew(self) -> bool:
        """Renew the heartbeat; False if this instance was reaped (its lease is lost)."""
        return await db.renew_heartbeat(self.sessions, self.instance)

    async def others_live(self) -> bool:
        """Whether another instance shares the database right now."""
        return await db.others_live(self.sessions, self.instance, self.lease)

    async def stopped(self) -> None:
        """A clean stop: nothing of ours is left to reap."""
        await db.mark_stopped(self.sessions, self.instance)

    async def view(self) -> list[dict[str, Any]]:
        """Every instance with its state, heartbeat age and drives (``tssctl status``)."""
        rows, drives = await db.instances_and_drives(self.sessions)
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for d in drives:
            entry = {"name": d.name, "state": d.state, "volume": d.volume}
            by_owner.setdefault(d.instance or "", []).append(entry)
        return [
            {
                "id": inst.id,
                "host": inst.host,
                "pid": inst.pid,
                "state": inst.state,
                "self": inst.id == self.instance,
                "started_at": inst.started_at.isoformat(),
                "heartbeat_at": inst.heartbeat_at.isoformat(),
                "heartbeat_age_s": round(float(seconds), 3),
                "drives": by_owner.get(inst.id, []),
            }
            for inst, seconds in rows
        ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

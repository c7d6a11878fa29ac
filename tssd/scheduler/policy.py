"""Scheduling policies: the rules that differ between tssd and the systems it replaces.

The scheduler framework (intake, drive assignment, sessions) is shared; a policy decides
which copy of a file to read, which tape queue goes first and how much of a tape's queue
one mount serves. ``tssd simulate --policy`` compares them on the same campaign:

- ``tssd``: the tape-aware policy: copies chosen as a set cover of the pending set
  (``intake.py``), tapes chosen by the cost model (``cost.py``), a mount serves the
  tape's queue in one forward pass, reordered by software RAO where that pays.
- ``tss``: GridKa's TSS-client: group by tape, sort by position, the most recently
  written copy, oldest tape queue first.
- ``fifo``: per-file ``dsmc``: arrival order, one file per mount (a tape already in a
  drive is kept for the next file on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tssd.backends.base import TapeCopy
from tssd.errors import ConfigError


@dataclass(frozen=True)
class Policy:
    name: str
    #: Prefer copies on tapes that are mounted or already have work queued.
    prefer_needed_tapes: bool
    #: Among the remaining copies take the newest (TSS) instead of the oldest.
    newest_copy: bool
    #: Order tape queues by priority before age.
    use_priority: bool
    #: Files one mount serves before the drive is offered to other work; None = all.
    files_per_session: int | None
    #: Read a tape's files in position order (else in arrival order).
    position_order: bool
    #: Choose tapes with the cost model and the in-memory planner (cost.py), with its
    #: rules (aging, fill wait, mount budget, queue limits, preemption) and RAO.
    cost_model: bool = False

    def choose_copy(self, copies: Sequence[TapeCopy], needed: set[str]) -> TapeCopy | None:
        """The copy to read, or None when the file has no copy on tape."""
        if not copies:
            return None
        pool = list(copies)
        if self.prefer_needed_tapes:
            pool = [c for c in copies if c.volume in needed] or pool
        if self.newest_copy:
            return max(pool, key=lambda c: (c.written_at, c.volume, c.position))
        return min(pool, key=lambda c: (c.written_at, c.volume, c.position))


POLICIES: dict[str, Policy] = {
    "tssd": Policy("tssd", prefer_needed_tapes=True, newest_copy=False, use_priority=True,
                   files_per_session=None, position_order=True, cost_model=True),
    "tss": Policy("tss", prefer_needed_tapes=False, newest_copy=True, use_priority=False,
                  files_per_session=None, position_order=True),
    "fifo": Policy("fifo", prefer_needed_tapes=False, newest_copy=True, use_priority=False,
                   files_per_session=1, position_order=False),
}  # fmt: skip


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        valid = ", ".join(sorted(POLICIES))
        raise ConfigError(f"unknown policy {name!r}; choose one of {valid}") from None

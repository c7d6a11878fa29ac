"""What one scheduling pass knows besides the tape itself: the queues' policies, the free
drives, the mounts of the day. The hold rules (``rules.py``) and the cost model
(``cost.py``) both read it, so it lives below them both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tssd.config import SchedulerSettings
from tssd.tape.geometry import Profile


class FreeDrive(Protocol):
    """A free drive as the hold rules see it (``DriveState``)."""

    @property
    def name(self) -> str: ...

    @property
    def volume(self) -> str | None: ...

    @property
    def cleaning_due(self) -> bool: ...


@dataclass(frozen=True)
class QueuePolicy:
    """A row of the ``queues`` table as the scheduler applies it."""

    priority: int = 0
    max_drives: int | None = None
    paused: bool = False
    #: Seconds within which the queue's requests should be done (None: no target).
    latency_target_s: float | None = None


@dataclass(frozen=True)
class Context:
    """What one scheduling pass knows besides the tape itself."""

    now: float
    settings: SchedulerSettings
    profile: Profile
    queues: Mapping[str, QueuePolicy]
    #: Volumes sitting in a free drive (no mount needed).
    mounted: frozenset[str]
    #: Sessions running per queue.
    queue_drives: Mapping[str, int]
    #: Mounts of a volume in the last 24 h.
    mounts_today: Callable[[str], int]
    #: Last pass's planned start of each eligible tape (latency targets: would it miss?).
    starts: Mapping[str, float] = field(default_factory=dict)
    #: Latency target per queue that has one (``latency_target_s``).
    targets: Mapping[str, float] = field(default_factory=dict)
    #: Tapes found late for a target by the last pass: they stay urgent until served.
    late: frozenset[str] = frozenset()
    #: Whether a volume may be given a drive now (``Scheduler.mountable``).
    mountable: Callable[[str], bool] = field(default=lambda _: True)
    #: The drives free this pass (what the hold rules may ask of a drive).
    free: tuple[FreeDrive, ...] = ()
    #: When the next running session is planned to end (``inf``: none running): a tape
    #: of target-bearing requests waits for company while that drive still reaches them.
    next_free: float = math.inf


NO_POLICY = QueuePolicy()

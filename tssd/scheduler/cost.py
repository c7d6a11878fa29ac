"""The cost model of the next mount: what a tape's session costs, what it serves, and the
rules that hold a tape back.

For each tape with pending recalls the scheduler estimates the drive time of a session
(robot, load, locates, per-file overhead, transfers, rewind and unload) from the
backend's timing profile, and the value it serves (bytes, raised by the age of the oldest
request). Tapes are then taken in this order:

1. a tape whose oldest request waited ``max_wait_s`` (oldest first): the aging bound;
2. higher effective priority (request priority + queue priority) first: strict classes,
   once the oldest higher-priority request of a tape that needs a mount has waited
   ``urgent_batch_s`` (until then the tape ranks as ordinary work, first among it);
3. a tape already in a free drive (no mount) before one that needs a mount;
4. the best value per second of drive time, in 10 % bands, and within a band the longest
   session first, so that the end of a campaign is balanced over the drives (LPT).

Rules that hold an eligible tape back are named (``tssctl why`` shows them); they are
declared once, in order, in ``rules.py`` (``HOLD_RULES``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from tssd.scheduler.context import NO_POLICY, Context, QueuePolicy
from tssd.scheduler.planner import TapeQueue
from tssd.scheduler.rules import HOLD_RULES, Facts
from tssd.tape.geometry import LTO9, Profile

#: Used when the backend exposes no timing profile (real libraries): LTO-9 figures.
DEFAULT_PROFILE = LTO9


def timing_of(backend: object) -> Profile | None:
    """The backend's nominal media model (:meth:`TapeBackend.timing`), None if unknown."""
    timing = getattr(backend, "timing", None)
    profile = timing() if callable(timing) else None
    return profile if isinstance(profile, Profile) else None


def profile_of(backend: object) -> Profile:
    """The backend's nominal media model when it has one, else LTO-9 figures."""
    return timing_of(backend) or DEFAULT_PROFILE


@dataclass(frozen=True)
class Verdict:
    """The scheduler's view of one tape: held by *rule*, or eligible with *key*."""

    volume: str
    rule: str  # "" when eligible
    priority: int
    service_s: float
    mount_s: float
    key: tuple[float, ...]
    #: Queues whose requests a session may read (unpaused), None: any queue's, also of
    #: requests that arrive for the tape while it is read.
    queues: frozenset[str] | None
    #: The queue a session of this tape counts against (max_drives).
    queue: str
    #: Urgent because the plan would miss a queue's latency target (sticks while queued).
    late: bool = False
    #: Earliest deadline of its target-bearing requests (``inf``: none) and the drive
    #: time from a drive changing tapes until they are read (:func:`reach_s`): what
    #: target preemption weighs (``Chooser.preempt``).
    deadline: float = math.inf
    reach_s: float = 0.0


#: The hold rules' tests in the order tried (rules.py), looked up once.
_HOLD_TESTS = tuple((r.name, r.test) for r in HOLD_RULES if r.test is not None)


def mount_cost_s(profile: Profile) -> float:
    """Drive time of one mount cycle: fetch and load, then rewind, unload and put back."""
    return (
        profile.mount_s() + profile.typical_unload_rewind_s() + profile.unload_s + profile.robot_s
    )


def service_s(tape: TapeQueue, profile: Profile, *, mounted: bool) -> tuple[float, float]:
    """(session seconds, of which mount cycle) to read everything queued on *tape*."""
    files = len(tape)
    # Each run of consecutive positions after the first costs a locate; a short locate is
    # mostly the fixed part plus a wrap change now and then.
    locates = max(0, tape.runs - (0 if mounted else 1)) + (0 if not mounted else 1)
    locate_s = locates * (profile.locate_base_s + profile.wrap_change_s)
    read_s = files * profile.per_file_s + profile.transfer_s(tape.bytes) + locate_s
    mount_s = 0.0 if mounted else mount_cost_s(profile)
    return read_s + mount_s, mount_s


def effective_priority(
    tape: TapeQueue, queues: Mapping[str, QueuePolicy], eligible: set[str]
) -> int:
    """The tape's highest request priority plus its best eligible queue's priority."""
    best: int | None = None
    for queue in eligible:
        q = queues.get(queue, NO_POLICY)
        best = q.priority if best is None else max(best, q.priority)
    return tape.max_priority() + (best or 0)


@dataclass(frozen=True, slots=True)
class _Due:
    """A tape against the latency targets of the queues it may read."""

    #: Earliest deadline of its target-bearing requests (``inf``: none).
    deadline: float = math.inf
    #: Drive time from a drive changing tapes until they are read (:func:`reach_s`).
    reach: float = 0.0
    #: The last plan would finish them after the deadline.
    late: bool = False


_NOT_DUE = _Due()


def evaluate(tape: TapeQueue, ctx: Context) -> Verdict:
    """Hold *tape* by a named rule, or rank it for the next free drive."""
    s = ctx.settings
    mounted = tape.volume in ctx.mounted
    total, mount_s = service_s(tape, ctx.profile, mounted=mounted)
    unpaused, room, priority = _standing(tape, ctx)
    due = _due(tape, ctx, unpaused, total, mount_s)
    if due.late:
        priority = max(priority, 1)
    batching = _batching(tape, ctx, priority, mounted, due)
    rank = 0 if batching else priority
    small = tape.bytes < s.fill_bytes and len(tape) < s.fill_files
    queue = max(room or unpaused or tape.queues, key=lambda q: (tape.queues[q], q), default="")
    # A session is kept to the queues with room only when some queue lacks it (a drive
    # limit); else it reads every queue's requests, also those that arrive for its tape
    # while it reads (an urgent request of another queue joins the running session
    # instead of waiting for its end; paused queues the runner leaves out).
    reads = frozenset(room) if room != unpaused or not room else None
    age = max(0.0, ctx.now - tape.oldest())
    facts = Facts(tape, ctx, mounted, unpaused, room, priority, small, age)
    for name, test in _HOLD_TESTS:
        if test(facts):
            return Verdict(tape.volume, name, rank, total, mount_s, (), reads, queue)
    key = _key(
        tape, ctx, total, age, mounted=mounted, rank=rank, due=due, first=batching and not small
    )
    return Verdict(
        tape.volume, "", rank, total, mount_s, key, reads, queue, due.late, due.deadline, due.reach
    )


def _standing(tape: TapeQueue, ctx: Context) -> tuple[set[str], set[str], int]:
    """(The queues of *tape* not paused, those of them with a drive to spare, its
    effective priority: 0 when ``priority_weight`` is off)."""
    if ctx.queues:
        unpaused = {q for q in tape.queues if not ctx.queues.get(q, NO_POLICY).paused}
        room = {q for q in unpaused if _has_room(q, ctx)}
        extra = effective_priority(tape, ctx.queues, room or unpaused) - tape.max_priority()
    else:  # no queue configured: the common case, kept cheap for large queues
        unpaused = room = set(tape.queues)
        extra = 0
    priority = tape.max_priority() + extra if ctx.settings.priority_weight else 0
    return unpaused, room, priority


def _due(tape: TapeQueue, ctx: Context, unpaused: set[str], total: float, mount_s: float) -> _Due:
    """*tape* against its readable queues' targets (docs/scheduling.md): late when the
    last plan would finish them after the oldest one's deadline, urgent work then, due at
    once. Once late it stays so: promoted, its planned start moves up and the test would
    flip. Only the queues it may read count: a paused queue's target makes nothing urgent.
    """
    targets = {q: t for q, t in ctx.targets.items() if q in unpaused} if ctx.targets else {}
    deadline = target_deadline(tape, targets) if targets else math.inf
    if deadline == math.inf:
        return _NOT_DUE
    # A session serves the target-bearing requests first (or places them before their
    # deadline), so what must fit before the deadline is reaching them, not the session.
    reach = min(total, reach_s(tape, targets, ctx.profile, mount_s))
    late = tape.volume in ctx.late or ctx.starts.get(tape.volume, ctx.now) + reach > deadline
    return _Due(deadline, reach, late)


def _batching(tape: TapeQueue, ctx: Context, priority: int, mounted: bool, due: _Due) -> bool:
    """Whether *tape*'s higher-priority requests still wait for company.

    They wait a little when the tape needs a mount, so that the next ones for it share
    the mount; meanwhile the tape leads the ordinary work. With a target the wait is the
    target's: while the next drive to change tapes would still reach them before the
    deadline, this one need not take them; not once the plan finds the tape late (that
    next drive goes to other tapes first: waiting, a late tape kept rank 0, so it neither
    went first nor asked a target preemption).
    """
    if priority <= 0 or mounted:
        return False
    if due.deadline < math.inf:
        arrives = ctx.next_free + due.reach + handover_s(ctx.profile)
        return arrives < due.deadline and not due.late
    return ctx.now < urgent_since(tape) + ctx.settings.urgent_batch_s


def _key(
    tape: TapeQueue,
    ctx: Context,
    total: float,
    age: float,
    *,
    mounted: bool,
    rank: int,
    due: _Due,
    first: bool,
) -> tuple[float, ...]:
    """The order of an eligible tape among the others, least first (module docstring)."""
    s = ctx.settings
    overdue = age >= s.max_wait_s
    value = tape.bytes * (1.0 + s.age_weight * min(1.0, age / max(s.max_wait_s, 1e-9)))
    rate = value / max(total, 1e-9)
    band = math.floor(math.log(max(rate, 1.0), 1.1))
    return (
        0.0 if overdue else 1.0,
        -age if overdue else 0.0,
        -float(rank),
        0.0 if mounted else 1.0,
        # Tapes worth a mount of their own that hold higher-priority requests not due yet
        # (*first*): their mount serves those at no extra cost (the oldest first).
        urgent_since(tape) if first else math.inf,
        # Late tapes by their last moment to start (deadline first, EDF): the drive a
        # target preemption frees goes to the tape it was freed for.
        due.deadline - due.reach if due.late and rank > 0 else math.inf,
        # Urgent tapes shortest first: a drive visits those with little else queued and
        # ends with one it then reads through; ordinary ones by value, longest first.
        0.0 if rank > 0 else -float(band),
        total if rank > 0 else -total,
        float(zlib.crc32(tape.volume.encode())),
    )


def handover_s(profile: Profile) -> float:
    """What a drive changing tapes may add to a mount cycle's estimate: the rewind of the
    tape it unloads can take the longest step (or a full rewind), not the typical one."""
    p = profile
    worst = max(p.rewind_steps_s) if p.rewind_steps_s else p.rewind_full_s
    return worst - p.typical_unload_rewind_s()


def reach_s(
    tape: TapeQueue, targets: Mapping[str, float], profile: Profile, mount_s: float
) -> float:
    """Drive time from a drive changing tapes until *tape*'s requests of target-bearing
    queues are read: its mount cycle (the rewind and unload it counts stand for the
    previous tape's, on the way) and, per such request, a locate half the tape long (from
    BOT to a random position) onto another wrap, the per-file overhead and an average
    file's transfer."""
    files = sum(tape.queues.get(q, 0) for q in targets)
    average = tape.bytes / max(1, len(tape))
    per_file = (
        profile.locate_base_s + profile.locate_full_s / 2 + profile.wrap_change_s
        + profile.per_file_s + profile.transfer_s(int(average))
    )  # fmt: skip
    return mount_s + files * per_file


def target_deadline(tape: TapeQueue, targets: Mapping[str, float]) -> float:
    """The earliest deadline (arrival + its queue's target) among the tape's requests of
    target-bearing queues (``inf``: none)."""
    return min(
        (tape.oldest_in(q) + t for q, t in targets.items() if q in tape.queues), default=math.inf
    )


def urgent_since(tape: TapeQueue) -> float:
    """Arrival of the tape's oldest request of a priority above 0 (its oldest request when
    only its queue gives it a priority): bulk requests queued long before do not count."""
    return tape.oldest_above(0) if tape.max_priority() > 0 else tape.oldest()


def _has_room(queue: str, ctx: Context) -> bool:
    limit = ctx.queues.get(queue, NO_POLICY).max_drives
    return limit is None or ctx.queue_drives.get(queue, 0) < limit

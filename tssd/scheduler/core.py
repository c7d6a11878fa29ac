"""The scheduling loop: assign free drives to the most valuable work, one tape per drive.

With the ``tssd`` policy, recall candidates come from the in-memory per-tape index
(``planner.py``) ranked by the cost model (``cost.py``), which also names the rule that
holds a tape back; the other policies (``tss``, ``fifo``) keep their simple database
queries. Migrations are batched per storage class. A volume is never given to two
drives: its reservation (``reservations.py``) is checked and taken without an ``await``
in between, and the database keeps ``drives.volume`` unique. Each drive's session state
(what it reserved, its tier, its tour, its task) is its ``DriveSession``
(``drive_session.py``).

Extension points: :meth:`Scheduler.mountable` is the one predicate deciding whether a
volume may be given a drive now (health, cluster claims), and :meth:`Scheduler._session`
is where every session starts and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from dataclasses import dataclass

import structlog

from tssd.clock import utcnow
from tssd.config import SchedulerSettings
from tssd.domain import Kind, State
from tssd.errors import TssdError
from tssd.metrics import Metrics
from tssd.ports.scheduling import SchedulerStore
from tssd.scheduler.choose import Chooser, Plan
from tssd.scheduler.context import QueuePolicy
from tssd.scheduler.cost import Verdict
from tssd.scheduler.decisions import Decisions
from tssd.scheduler.drive_session import DriveSession, DriveSessions
from tssd.scheduler.drives import DriveManager, DriveState
from tssd.scheduler.intake import Intake
from tssd.scheduler.planner import Planner
from tssd.scheduler.policy import Policy
from tssd.scheduler.sessions import SessionRunner
from tssd.work import Noted, WorkSignal

log = structlog.get_logger()
#: Loop seconds a pass spends locating before it chooses (:meth:`Scheduler._locate_all`).
LOCATE_PASS_S = 1.0
#: Longest wait of a locate batch for the pools' calls in flight: the backlog moves on
#: while calls keep arriving.
FOREGROUND_WAIT_S = 0.05


@dataclass(frozen=True)
class Candidate:
    """A unit of drive work: the recalls of one tape, or a storage class's migrations."""

    purpose: Kind  # RECALL or MIGRATE
    target: str  # volume (recall) or storage class (migrate)
    priority: int
    oldest: float  # sort key: smaller = older
    #: The queue the session counts against, and the queues it may read (None = all).
    queue: str = ""
    queues: frozenset[str] | None = None
    #: Estimated drive seconds of the session (cost model), 0 when unknown.
    service_s: float = 0.0


def _recall(v: Verdict) -> Candidate:
    return Candidate(Kind.RECALL, v.volume, v.priority, 0.0, v.queue, v.queues, v.service_s)


class Scheduler:
    """Decides, pass after pass, which work each free drive does, and runs it.

    A pass (:meth:`schedule_once`) carries out the work that needs no drive (through the
    *intake*), then gives free drives the best candidates: the *chooser*'s ranked tapes
    (``tssd`` policy) or the policy's queries, and storage classes due for migration. Each
    session runs as a task of its own through the *runner*; each drive's session object
    (*sessions*) holds its reservations, which make sure no volume or storage class is
    in two sessions, and drives change only through the *drives* manager. :meth:`stop`
    starts no more sessions and drains the running ones.
    It owns the *work* signal: the store and the API wake it through its methods.
    """

    def __init__(
        self,
        settings: SchedulerSettings,
        store: SchedulerStore,
        drives: DriveManager,
        intake: Intake,
        runner: SessionRunner,
        metrics: Metrics,
        policy: Policy,
        *,
        chooser: Chooser,
        sessions: DriveSessions,
        work: WorkSignal,
    ) -> None:
        self.policy = policy
        self.work = work
        self.settings = settings
        self.store = store
        self.drives = drives
        self.intake = intake
        self.runner = runner
        self.metrics = metrics
        #: One session object per drive; their reservations' shared index.
        self.sessions = sessions
        self.reservations = sessions.reservations
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._seen_pending: set[tuple[str, str]] = set()
        self._pending_at = float("-inf")
        self._migrations_waiting = True
        #: Sessions started, per purpose (recall, migrate): ``tssd simulate`` reports them.
        self.sessions_started: Counter[Kind] = Counter()
        #: Queues an operator paused: none of their recalls or migrations starts.
        self._paused: frozenset[str] = frozenset()
        #: Freed drives and the pass deciding them (the decision metric).
        self.decisions = Decisions(metrics.schedule_decision_seconds)
        #: Clock time the periodic pass last armed the migration query (_arm_migrations).
        self._armed_at = float("-inf")
        self._drive_freed = asyncio.Event()
        self.chooser = chooser
        #: The per-tape index of the cost model (``tssd`` policy), else None.
        self.planner: Planner | None = chooser.planner if policy.cost_model else None
        #: Loop time of the last ranking of every tape and what it took (_rank_now).
        self._ranked_at = float("-inf")
        self._rank_took = 0.0
        #: Bound of the locate step of one pass (LOCATE_PASS_S; tests lower it).
        self.locate_pass_s = LOCATE_PASS_S

    def mountable(self, volume: str) -> bool:
        """Whether *volume* may be given a drive now (extend: health, cluster claims)."""
        busy = self.reservations.volume_busy(volume)
        return not busy and self.drives.claims.mountable(volume)

    def resync_soon(self) -> None:
        """Others changed the queue (tssd.cluster): reload the index on the next pass."""
        if self.planner is not None:
            self.chooser.resync_soon()
        self.work.requeued()

    async def start(self) -> None:
        await self.drives.load()
        for name in self.drives.drives:
            self.sessions.of(name)  # one session object per drive, from the start
        requeued = await self.store.requeue_active("daemon restarted")
        if requeued:
            log.info("requests.requeued", count=requeued)
        if self.planner is not None:
            clock = self.drives.clock
            await self.drives.ledger.load(self.drives.mounts, clock.now(), utcnow())
            await self.chooser.resync()
            log.info("planner.loaded", pending=len(self.planner), tapes=len(self.planner.tapes))

    async def run(self) -> None:
        """Schedule until :meth:`stop`; a failing pass is logged and retried."""
        work = self.work
        full = True
        loop = asyncio.get_running_loop()
        started = float("-inf")
        while not self._stopping.is_set():
            await self._batch_submissions(started, full)
            # The loop's clock, not perf_counter: virtual under `tssd simulate`, which must
            # give the same report for the same seed.
            started = loop.time()
            work.clear()
            self.decisions.pass_begins()
            self._drive_freed.clear()
            try:
                await self.schedule_once(full=full)
            except TssdError as exc:
                log.warning("scheduler.pass_failed", error=str(exc))
            except Exception:
                log.exception("scheduler.pass_crashed")
            self.decisions.pass_ends(full=full, scored=self.chooser.ranking.scored)
            timeout = self.settings.tick_s
            if self.planner is not None:
                # A latency target's last moment before the next tick: a pass then
                # (docs/scheduling.md, "Latency targets per queue"; inf without targets).
                timeout = min(timeout, self.chooser.next_last_moment() - self.drives.clock.now())
            try:
                await asyncio.wait_for(work.wait(), timeout=max(timeout, 0.0))
                full = False
            except TimeoutError:
                # The periodic pass looks at everything, whoever changed the database.
                full = True

    def _arm_migrations(self, noted: Noted) -> None:
        """Have the next pass with a free drive ask for migration groups: after new or
        requeued work or a queue change, and on a periodic pass at most every
        ``resync_s`` (others' writes). Asked on every periodic pass, the query was on the
        decision path of nearly every freed drive (issue 22); an empty answer is only
        stale after one of those, and groups found keep it armed until served."""
        now = self.drives.clock.now()
        changed = Kind.MIGRATE in noted.submitted or noted.queues or noted.everything
        if changed or now - self._armed_at >= self.settings.resync_s:
            self._migrations_waiting = True
            self._armed_at = now

    async def _batch_submissions(self, last_start: float, full: bool) -> None:
        """Woken only by new requests soon after the last pass: let more of them arrive.

        tss-hsm creates one request per call and ENDIT a few per pass; without this each
        would cost a pass of its own (locate, rank every tape), a cost that grows with the
        pending set. A freed drive, an operator's change or a full pass is never delayed.
        """
        wait = self.settings.submit_batch_s - (asyncio.get_running_loop().time() - last_start)
        only_new = self.work.peek().only_submissions
        if full or wait <= 0 or self.decisions.freed or not only_new:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drive_freed.wait(), timeout=wait)

    async def stop(self, grace_s: float) -> None:
        """Start no new session; let running ones finish for *grace_s*, then cancel."""
        self._stopping.set()
        self.work.nudge()
        if self._tasks:
            log.info("scheduler.draining", sessions=len(self._tasks), grace_s=grace_s)
            _, late = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in late:
                task.cancel()
            if late:
                log.warning("scheduler.cancelled_sessions", sessions=len(late))
                await asyncio.wait(late)
        await self.chooser.close()

    async def schedule_once(self, *, full: bool = True) -> None:
        """One pass. Not *full*: skip the kinds of work nobody submitted since the last."""
        noted = self.work.take()
        full = full or noted.everything
        if full or noted.queues:
            self._paused = await self.store.queue_settings.paused()
            self.runner.pause(self._paused)
        self.decisions.mark("queues")
        if full or Kind.REMOVE in noted.submitted:
            await self.intake.removals()
        self.decisions.mark("removals")
        if full or Kind.MIGRATE in noted.submitted or noted.queues:
            self._arm_migrations(noted)
            for request, copy in await self.intake.migrations_on_tape(self._paused):
                claimed = await self.store.scheduling.claim_ids([request.id])
                if claimed:
                    await self.runner.complete_migration(claimed[0], copy)
        self.decisions.mark("migrations")
        await self._locate_all(fresh=full or Kind.RECALL in noted.submitted)
        self.decisions.mark("locate")
        if self._stopping.is_set():
            return
        if self.planner is not None:
            # An operator's `tssctl queues set` must hold or release work at once.
            await self.chooser.refresh(full=full or noted.queues)
            self.decisions.mark("refresh")
            if self._rank_now():
                self.decisions.deciding()
                await self._assign_planned()
        elif self.drives.free():
            self.decisions.deciding()
            # The candidate queries scan the queue: only worth it when a drive can take work.
            for candidate in await self._candidates():
                drive = self._pick_drive(candidate)
                if drive is not None:
                    self._start(drive, candidate)
        self.decisions.mark("assign")
        await self.drives.unload_expired(self.settings.keep_mounted_s, self.reservations)
        self.decisions.mark("dismount")
        await self._update_pending()
        self.decisions.mark("pending")

    async def _locate_all(self, *, fresh: bool) -> None:
        """Locate everything queued before choosing: a tape started on a partial view of
        its queue reads sparsely and leaves files behind the head for another mount.
        *fresh*: recalls were submitted or requeued since the last pass.

        For at most ``locate_pass_s`` of loop time: while recalls arrive faster than they
        are located (a bulk intake, each locate a few round trips to a busy PostgreSQL),
        "everything" never came, and no drive was given work until the intake stopped.
        The next pass, at once, locates on; a session claims what is located meanwhile.
        Under ``tssd simulate`` the loop's clock stands still here: every pass locates all.
        """
        if fresh:
            self.intake.expect_recalls()
        loop = asyncio.get_running_loop()
        until = loop.time() + self.locate_pass_s
        while True:
            # A pool's call in flight goes first (tssd.work.Foreground), for a moment.
            await self.work.foreground.quiet(FOREGROUND_WAIT_S)
            if await self.intake.locate_recalls(self.reservations.volumes) < self.intake.batch:
                return
            if loop.time() >= until:
                self.work.nudge()
                return

    async def _candidates(self) -> list[Candidate]:
        found = await self._recall_candidates() + await self._migration_candidates()
        # A tape already in a drive first (no mount), then priority, then age.
        return sorted(
            found,
            key=lambda c: (self.drives.holding(c.target) is None, -c.priority, c.oldest),
        )

    def _rank_now(self) -> bool:
        """Always when a drive is free. With every drive busy a ranking only refreshes what
        ``why``, ETAs and preemption read; at 5,000 tapes it costs tens of milliseconds of
        CPU and a drive freeing up meanwhile waits for it (issue 22: decisions at 1 M
        pending), so it then takes at most 1 % of the time. Loop time: virtual under
        ``tssd simulate``, where a ranking takes none and every pass ranks as before."""
        now = asyncio.get_running_loop().time()
        return bool(self.drives.free()) or now - self._ranked_at >= 100 * self._rank_took

    async def _assign_planned(self) -> None:
        """Cost-model pass: rank tapes, fill free drives, ask for preemption if needed."""
        loop = asyncio.get_running_loop()
        begin = loop.time()
        touched = self.reservations.drain_touched()
        plan = self.chooser.plan(self.reservations.volumes, self.mountable, touched)
        self._ranked_at = loop.time()
        self._rank_took = self._ranked_at - begin
        self.decisions.mark("rank")
        try:
            waiting = await self._fill_drives(plan)
        finally:
            plan.close()
        self.chooser.waiting(frozenset(v.volume for v in waiting if v.priority > 0))
        tiers = self.runner.tiers
        for name in self.chooser.preempt(waiting, tiers.yielding, tiers.tier_of):
            log.info("session.preempt", drive=name, volume=self.chooser.running[name].volume)
            tiers.ask_yield(name)

    async def _fill_drives(self, plan: Plan) -> list[Verdict]:
        """Give free drives the plan's tapes in order, migrations after the tapes already
        in a free drive (within their share); return the eligible tapes of priority above
        0 left without a drive, best first. The walk stops at the last free drive: the
        tapes after it would each get no drive, so only the urgent ones matter."""
        recalls = iter(plan.walk)
        head = list(itertools.islice(recalls, 1))
        recalls = itertools.chain(head, recalls)
        migrations = await self._migration_candidates() if self.drives.free() else []
        if migrations and head:
            writing = sum(1 for t in self._tasks if t.get_name().startswith("migrate:"))
            migrations = migrations[: max(0, self.chooser.write_cap() - writing)]
        per_queue = Counter(r.queue for r in self.chooser.running.values())
        seen: set[str] = set()
        planned = itertools.chain(
            ((_recall(v), v) for v in itertools.islice(recalls, plan.mounted)),
            ((m, None) for m in migrations),
            ((_recall(v), v) for v in recalls),
        )
        for candidate, verdict in planned:
            if not self.drives.free():
                break
            if verdict is not None:
                seen.add(verdict.volume)
                if not self._queue_room(candidate, per_queue):
                    continue
            drive = self._pick_drive(candidate)
            if drive is None:
                continue  # its tape is in a drive that is not free
            if candidate.purpose is Kind.RECALL:
                per_queue[candidate.queue] += 1
            self._start(drive, candidate)
        return [
            v
            for v in plan.urgent_after(seen)
            if self._queue_room(_recall(v), per_queue) and self.drives.holding(v.volume) is None
        ]

    def _queue_room(self, candidate: Candidate, per_queue: Counter[str]) -> bool:
        limit = self.chooser.queues.get(candidate.queue, QueuePolicy()).max_drives
        return limit is None or per_queue[candidate.queue] < limit

    async def _migration_candidates(self) -> list[Candidate]:
        found = []
        waiting = self._migrations_waiting
        groups = await self.intake.migration_groups(self._paused) if waiting else []
        self._migrations_waiting = bool(groups)
        for sc, _files, nbytes, age in groups:
            filling = self.runner.filling.get(sc)
            if self.reservations.class_busy(sc) or filling in self.reservations.volumes:
                continue
            if (
                nbytes >= self.settings.migrate_batch_bytes
                or age >= self.settings.migrate_max_age_s
            ):
                found.append(Candidate(Kind.MIGRATE, sc, 0, -age))
        return found

    async def _recall_candidates(self) -> list[Candidate]:
        backpressure = self.runner.backpressure
        held = backpressure.held_prefixes() if backpressure else ()
        reads = self.store.scheduling
        if self.policy.files_per_session is not None:
            # Arrival order: the tapes of the oldest requests, one file at a time.
            limit = 4 * len(self.drives.drives) + len(self.reservations.volumes)
            rows = (await reads.recall_volumes(self._paused, held, first=limit))[::-1]
        else:
            rows = await reads.recall_volumes(self._paused, held)
        use_priority = self.policy.use_priority
        by_volume = {
            v: Candidate(Kind.RECALL, v, (p or 0) if use_priority else 0, float(first))
            for v, p, first in rows
            if v is not None and self.mountable(v)
        }
        return list(by_volume.values())

    def _pick_drive(self, candidate: Candidate) -> DriveState | None:
        free = self.drives.free()
        volume = (
            candidate.target
            if candidate.purpose is Kind.RECALL
            else self.runner.filling.get(candidate.target)
        )
        holder = self.drives.holding(volume) if volume else None
        if holder is not None:
            return holder if holder in free else None
        if not free:
            return None
        # An empty drive costs no dismount; otherwise the one idle longest.
        return min(free, key=lambda d: (d.volume is not None, d.idle_since))

    def _start(self, drive: DriveState, candidate: Candidate) -> None:
        session = self.sessions.of(drive.name)
        self.drives.occupy(drive)
        self.sessions_started[candidate.purpose] += 1
        session.reserve(candidate.purpose, candidate.target, drive.volume)
        if candidate.purpose is Kind.RECALL:
            stop = self.chooser.started(
                drive.name, candidate.target, candidate.queue, candidate.priority,
                candidate.service_s,
            )  # fmt: skip
            session.begin_recall(candidate.priority, stop)  # stop: staggered (stagger.py)
        session.task = asyncio.create_task(
            self._session(session, drive, candidate),
            name=f"{candidate.purpose}:{candidate.target}@{drive.name}",
        )
        self._tasks.add(session.task)
        session.task.add_done_callback(self._tasks.discard)
        self.drives.update_gauge()

    async def _session(
        self, session: DriveSession, drive: DriveState, candidate: Candidate
    ) -> None:
        held = drive.volume

        async def make_room(volume: str) -> None:
            # The tape this session replaces is free from its unload on: held to the
            # session's end, a tape with requests left (a preempted leftover, urgent
            # requests after a visit) could not go to another drive for a whole session.
            if held is not None and held != volume:
                await self.drives.dismount(drive)
                session.release_volume(held)

        log.info(
            "session.start", drive=drive.name, purpose=candidate.purpose, target=candidate.target
        )
        try:
            if candidate.purpose is Kind.RECALL:
                await make_room(candidate.target)
                await self.runner.recall(drive, candidate.target, candidate.queues)
            else:
                await self.runner.migrate(drive, candidate.target, make_room)
        except TssdError as exc:
            self.drives.session_failed(drive, str(exc))
            log.warning("session.failed", drive=drive.name, target=candidate.target, error=str(exc))
        except Exception:
            log.exception("session.crashed", drive=drive.name, target=candidate.target)
        finally:
            self.chooser.ended(drive.name)
            session.ended()
            session.release()
            self.drives.vacate(drive, idle_since=self.drives.clock.now())
            self.decisions.drive_freed()
            self._drive_freed.set()
            self.drives.update_gauge()
            self.work.nudge()
            log.info(
                "session.end", drive=drive.name, purpose=candidate.purpose, target=candidate.target
            )

    async def _update_pending(self) -> None:
        # A full count scans the table: often enough for a gauge, not on every pass.
        now = self.drives.clock.now()
        if now - self._pending_at < self.settings.tick_s * 5:
            return
        self._pending_at = now
        pending: dict[tuple[str, str], int] = {}
        for kind, queue, state, n in await self.store.counts():
            if state in (State.QUEUED, State.ACTIVE):
                pending[(kind, queue)] = pending.get((kind, queue), 0) + n
        for (kind, queue), n in pending.items():
            self.metrics.requests_pending.labels(kind, queue).set(n)
        for labels in list(self._seen_pending - pending.keys()):
            self.metrics.requests_pending.labels(*labels).set(0)
        self._seen_pending = set(pending)

    async def shutdown_drives(self, bound_s: float) -> None:
        """Unload the tapes of idle drives after sessions ended, for at most *bound_s*
        seconds in all (:meth:`DriveManager.unload_idle`)."""
        await self.drives.unload_idle(bound_s)

"""Run one campaign: the daemon's components on a virtual clock and an in-memory database."""

from __future__ import annotations

import asyncio
import functools
import io
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from tssd.app import Wiring, build_services
from tssd.backends.base import Sink
from tssd.backends.sim.catalog_csv import import_csv
from tssd.clock import inline
from tssd.config import SchedulerSettings, Settings, SimSettings
from tssd.config.queues import QueueSettings
from tssd.db.books import Books, Hooks, open_sql_books
from tssd.domain import Kind, Request
from tssd.files import CountingSink
from tssd.scheduler.drives import MountRecord
from tssd.scheduler.policy import get_policy
from tssd.services import Services
from tssd.simulate.campaign import Arrival
from tssd.simulate.vloop import inline_sqlite_creator
from tssd.submit import SubmitSpec
from tssd.tape.geometry import get_profile

log = structlog.get_logger()


@dataclass(frozen=True)
class Options:
    catalog: Path
    requests: Path
    profile: str = "lto9"
    drives: int = 10
    window: int | None = None
    policy: str = "tssd"
    seed: int = 0
    robot_arms: int = 2
    #: SchedulerSettings fields to override, e.g. (("rao", "off"),).
    scheduler: tuple[tuple[str, Any], ...] = ()
    #: SimSettings fields to override, e.g. (("layout_spread", 0.0),).
    sim: tuple[tuple[str, Any], ...] = ()
    #: ``[[queues]]`` tables of ``--config``: seeded into the queues table at start.
    queues: tuple[QueueSettings, ...] = ()


@dataclass
class Outcome:
    """What the campaign did, in virtual seconds since its start."""

    arrivals: Sequence[Arrival]
    finished_at: dict[int, float] = field(default_factory=dict)
    request_of: dict[int, int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    mounts: list[MountRecord] = field(default_factory=list)
    makespan_s: float = 0.0
    wall_s: float = 0.0
    peak_pending: int = 0
    #: Recall sessions the scheduler started (one per file for fifo, per visit otherwise).
    sessions: int = 0


class LoopClock:
    """The event loop's clock: virtual seconds under ``tssd simulate``."""

    def __init__(self, epoch: float = 1.7e9) -> None:
        self._epoch = epoch

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def wall(self) -> Any:
        from datetime import UTC, datetime

        return datetime.fromtimestamp(self._epoch + self.now(), UTC)


def counting_sink(_request: Request) -> Sink:
    return CountingSink()


def simulation_settings(options: Options, home: Path) -> Settings:
    sim = SimSettings(
        data_dir=str(home / "sim"), drives=options.drives, tapes=0, profile=options.profile,
        time_scale=1.0, seed=options.seed, robot_arms=options.robot_arms, **dict(options.sim),
    )  # fmt: skip
    # Passes come from events (arrivals, finished sessions); the tick is only a safety net.
    base = {"tick_s": 300.0, "keep_mounted_s": 60.0, "shutdown_grace_s": 0.0, "resync_s": 3600.0}
    scheduler = SchedulerSettings(**{**base, **dict(options.scheduler)})
    return Settings(home=str(home), sim=sim, scheduler=scheduler, queues=options.queues)


async def run_campaign(options: Options, arrivals: Sequence[Arrival], catalog_text: str) -> Outcome:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tssd-sim-") as tmp:
        settings = simulation_settings(options, Path(tmp))
        progress = Progress(Outcome(arrivals=arrivals))
        wiring = Wiring(
            clock=LoopClock(), sink_for=counting_sink, policy=get_policy(options.policy),
            offload=inline, on_finished=(progress.finished,),
        )  # fmt: skip
        books = functools.partial(_books, settings, options.profile, catalog_text)
        async with build_services(settings, wiring, books) as services:
            outcome = await _drive(services, options, arrivals, progress)
    outcome.wall_s = time.perf_counter() - started
    return outcome


@asynccontextmanager
async def _books(
    settings: Settings, profile: str, catalog_text: str, hooks: Hooks
) -> AsyncIterator[Books]:
    """The books on a throw-away SQLite in memory, the campaign's catalog imported."""
    connector = inline_sqlite_creator(":memory:")
    async with open_sql_books(settings, hooks, throwaway=connector) as books:
        # Tapes of the campaign's profile: its capacity sets the wrap geometry, which
        # the library's locates, the scheduler's RAO and the lower bound all share.
        capacity = get_profile(profile).capacity_bytes
        await import_csv(
            books.catalogs.sim(), io.StringIO(catalog_text), replace=True, capacity=capacity
        )
        yield books


class Progress:
    """The requests of the campaign not finished yet, told of every finish."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.outstanding: set[int] = set()
        self.released = asyncio.Event()

    def finished(self, ids: Sequence[int]) -> None:
        now = asyncio.get_running_loop().time()
        for request_id in ids:
            if request_id in self.outstanding:
                self.outstanding.discard(request_id)
                self.outcome.finished_at[request_id] = now
        self.released.set()


async def _drive(
    services: Services, options: Options, arrivals: Sequence[Arrival], progress: Progress
) -> Outcome:
    outcome, outstanding, released = progress.outcome, progress.outstanding, progress.released
    await services.scheduler.start()
    task = asyncio.create_task(services.scheduler.run(), name="scheduler")
    try:
        await _feed(services, options, arrivals, outstanding, released, outcome)
        while outstanding:
            released.clear()
            await released.wait()
        outcome.makespan_s = max(outcome.finished_at.values(), default=0.0)
    finally:
        await services.scheduler.stop(0.0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    outcome.mounts = list(services.drives.history)
    outcome.sessions = services.scheduler.sessions_started[Kind.RECALL]
    outcome.requests = await _recalls(services)
    return outcome


async def _feed(
    services: Services,
    options: Options,
    arrivals: Sequence[Arrival],
    outstanding: set[int],
    released: asyncio.Event,
    outcome: Outcome,
) -> None:
    """Hand the arrivals to tssd as a pool would, never more than the window at once."""
    loop = asyncio.get_running_loop()
    window = options.window or len(arrivals) or 1
    i = 0
    while i < len(arrivals):
        delay = arrivals[i].at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        while len(outstanding) >= window:
            released.clear()
            await released.wait()
        room = window - len(outstanding)
        batch: list[Arrival] = []
        while i < len(arrivals) and arrivals[i].at <= loop.time() and len(batch) < room:
            batch.append(arrivals[i])
            i += 1
        results = await services.store.submit([_spec(a) for a in batch])
        for arrival, (_created, row) in zip(batch, results, strict=True):
            outcome.request_of[arrival.index] = row.id
            if row.state in ("queued", "active") and row.id not in outcome.finished_at:
                outstanding.add(row.id)
        outcome.peak_pending = max(outcome.peak_pending, len(outstanding))


def _spec(arrival: Arrival) -> SubmitSpec:
    return SubmitSpec(
        kind=Kind.RECALL, key=arrival.pnfsid, pnfsid=arrival.pnfsid,
        path=f"/simulated/{arrival.pnfsid}", queue=arrival.queue, priority=arrival.priority,
    )  # fmt: skip


async def _recalls(services: Services) -> list[Request]:
    return await services.history.all_recalls()

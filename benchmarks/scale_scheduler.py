"""Scheduler scale: 1,000,000 pending recalls over 5,000 tapes.

Usage: python benchmarks/scale_scheduler.py [--pending N] [--tapes N] [--pg URL]

Measures, in one process:
- add: planner.add of every pending recall, one at a time (amortised cost per request);
- choose-next: one ranking of every tape by the cost model (what a scheduling pass did
  when a drive freed up), median of 20;
- decide: what a pass does now (``Chooser.plan``, the incremental ranking of
  ``ranking.py``) when a drive frees up: the session that ended claimed its tape's
  recalls, new requests came for a few tapes, the clock moved; the best tape is taken
  (median and max of 200 decisions, after the first, which scores every tape);
- RSS of the process holding the index;
- with --pg: restart to ready on PostgreSQL: the rows are written to a fresh database
  (COPY), then the time to load the planner from it as ``tssd serve`` does at start.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from tssd.backends.sim.profiles import LTO9
from tssd.config import SchedulerSettings
from tssd.scheduler.choose import Chooser
from tssd.scheduler.context import Context
from tssd.scheduler.cost import evaluate
from tssd.scheduler.drives import DriveState
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger


def entries(pending: int, tapes: int, seed: int = 1) -> list[Entry]:
    rng = random.Random(seed)
    return [
        Entry(i + 1, f"V{rng.randrange(tapes):05d}", rng.randrange(1, 20_000),
              rng.randrange(10**8, 4 * 10**9), rng.choice((0, 0, 0, 5)), "default",
              rng.uniform(0, 3600))
        for i in range(pending)
    ]  # fmt: skip


def choose_next(planner: Planner, settings: SchedulerSettings) -> tuple[float, float]:
    ctx = Context(
        now=7200.0, settings=settings, profile=LTO9, queues={}, mounted=frozenset(),
        queue_drives={}, mounts_today=lambda _v: 0,
    )  # fmt: skip
    started, cpu = time.perf_counter(), time.process_time()
    ranked = sorted(
        (v for v in (evaluate(t, ctx) for t in planner.queues()) if not v.rule),
        key=lambda v: v.key,
    )
    assert ranked
    return time.perf_counter() - started, time.process_time() - cpu


def decide(planner: Planner, settings: SchedulerSettings, tapes: int) -> dict[str, float]:
    """CPU per decision of the incremental ranking (module docstring)."""
    clock = SimpleNamespace(t=7200.0)
    clock.now = lambda: clock.t
    free = [DriveState("d0")]
    drives = SimpleNamespace(drives={"d0": free[0]}, free=lambda: free, ledger=MountLedger())
    chooser = Chooser(settings, None, None, drives, LTO9, clock, planner=planner)  # type: ignore[arg-type]
    rng = random.Random(2)
    next_id = len(planner) + 1
    first = time.process_time()
    chooser.plan((), lambda _v: True, ()).close()
    first = time.process_time() - first
    cpus, scored = [], []
    for _ in range(200):
        cpu = time.process_time()
        plan = chooser.plan((), lambda _v: True, ())
        best = next(iter(plan.walk))
        plan.close()
        cpus.append(time.process_time() - cpu)
        scored.append(chooser.ranking.scored)
        # Between two decisions: the chosen tape's session claims its recalls, ten new
        # requests arrive for random tapes, ten seconds pass.
        planner.take(list(planner.tapes[best.volume].entries))
        planner.add(
            Entry(next_id + k, f"V{rng.randrange(tapes):05d}", rng.randrange(1, 20_000),
                  rng.randrange(10**8, 4 * 10**9), 0, "default", clock.t)
            for k in range(10)
        )  # fmt: skip
        next_id += 10
        clock.t += 10.0
    return {"decide_first_cpu_ms": round(first * 1000, 1),
            "decide_cpu_ms": round(statistics.median(cpus) * 1000, 2),
            "decide_max_cpu_ms": round(max(cpus) * 1000, 2),
            "decide_scored_median": statistics.median(scored)}  # fmt: skip


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def restart_to_ready(url: str, rows: list[Entry]) -> dict[str, float]:
    import asyncpg

    from tssd.db.engine import create_engine, session_factory
    from tssd.db.models import Base
    from tssd.db.scheduling import Candidates
    from tssd.scheduler.queues import load_pending

    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    raw = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    now = datetime.now(UTC)
    started = time.perf_counter()
    await raw.copy_records_to_table(
        "requests",
        columns=["kind", "state", "key", "pnfsid", "queue", "priority", "volume", "position",
                 "size", "hsm_type", "hsm_instance", "attempts", "created_at", "updated_at"],
        records=[("recall", "queued", f"{e.id:024X}", f"{e.id:024X}", e.queue, e.priority,
                  e.volume, e.position, e.size, "osm", "osm", 0, now, now) for e in rows],
    )  # fmt: skip
    await raw.execute("ANALYZE requests")
    written = time.perf_counter() - started
    await raw.close()
    started, cpu = time.perf_counter(), time.process_time()
    planner = Planner()
    planner.begin_resync()
    planner.finish_resync(await load_pending(Candidates(session_factory(engine)), 0.0, now))
    ready = time.perf_counter() - started
    ready_cpu = time.process_time() - cpu
    await engine.dispose()
    assert len(planner) == len(rows)
    return {"write_s": round(written, 1), "ready_s": round(ready, 1),
            "ready_cpu_s": round(ready_cpu, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--tapes", type=int, default=5_000)
    parser.add_argument("--pg", help="an empty PostgreSQL database URL (postgresql+asyncpg://)")
    args = parser.parse_args()
    rows = entries(args.pending, args.tapes)
    planner = Planner()
    started, cpu = time.perf_counter(), time.process_time()
    for entry in rows:
        planner.add((entry,))
    add_us = (time.perf_counter() - started) / len(rows) * 1e6
    add_cpu_us = (time.process_time() - cpu) / len(rows) * 1e6
    settings = SchedulerSettings()
    times = [choose_next(planner, settings) for _ in range(20)]
    walls, cpus = [w for w, _ in times], [c for _, c in times]
    # Wall figures include whatever else the machine runs; CPU figures do not.
    result: dict[str, Any] = {
        "pending": len(planner), "tapes": len(planner.tapes), "add_us": round(add_us, 2),
        "add_cpu_us": round(add_cpu_us, 2),
        "choose_next_ms": round(statistics.median(walls) * 1000, 1),
        "choose_next_cpu_ms": round(statistics.median(cpus) * 1000, 1),
        "choose_next_max_ms": round(max(walls) * 1000, 1), "rss_mb": round(rss_mb()),
    }  # fmt: skip
    result |= decide(planner, settings, args.tapes)
    taken = [e.id for e in rows[: len(rows) // 10]]
    started = time.perf_counter()
    planner.take(taken)
    result["take_us"] = round((time.perf_counter() - started) / len(taken) * 1e6, 2)
    if args.pg:
        result |= asyncio.run(restart_to_ready(args.pg, rows))
    print(result)


if __name__ == "__main__":
    main()

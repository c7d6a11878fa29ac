"""What one pass of the unclaimed-part-file reaper (tssd.delivery.Reaper.sweep) costs.

A database holding N finished recalls that tss-hsm claimed (``delivery = 'claimed'``)
and a few unclaimed ones past the bound: the sweep must read only the unclaimed ones
(an index range on ``ix_requests_delivery_state``), so its time must not grow with N.

    python benchmarks/delivery_sweep.py --claimed 200000 --unclaimed 20 --passes 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import insert

from tssd.config import Settings
from tssd.config.sections import ApiSettings, DatabaseSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.lookups import SqlHistory
from tssd.db.models import Request, utcnow
from tssd.db.schema import ensure_schema
from tssd.db.store import RequestStore
from tssd.delivery import FileMovers, Reaper
from tssd.metrics import Metrics


def rows(start: int, count: int, delivery: str, pool: Path) -> list[dict[str, object]]:
    finished = utcnow() - timedelta(hours=2)
    return [
        {"kind": "recall", "state": "done", "key": f"{i:032X}", "pnfsid": f"{i:032X}",
         "path": f"{pool}/{i:032X}", "size": 1, "delivery": delivery, "queue": "default",
         "priority": 0, "attempts": 1, "hsm_type": "osm", "hsm_instance": "osm",
         "created_at": finished, "updated_at": finished, "finished_at": finished}
        for i in range(start, start + count)
    ]  # fmt: skip


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home, pool = Path(tmp), Path(tmp) / "pool"
        pool.mkdir()
        url = f"sqlite+aiosqlite:///{home / 'tssd.db'}"
        engine = create_engine(url)
        await ensure_schema(engine, auto_init=True)
        async with engine.begin() as conn:
            for start in range(0, args.claimed, 50_000):
                n = min(50_000, args.claimed - start)
                await conn.execute(insert(Request), rows(start, n, "claimed", pool))
        settings = Settings(
            home=str(home),
            database=DatabaseSettings(url=url),
            api=ApiSettings(pool_roots=str(pool)),
        )
        store = RequestStore(session_factory(engine), postgres=False)
        history = SqlHistory(store.sessions)
        reaper = Reaper(store, history, FileMovers(settings), Metrics(), claim_timeout_s=60.0)
        times: list[float] = []
        for p in range(args.passes):
            base = args.claimed + p * args.unclaimed
            if args.unclaimed:
                async with engine.begin() as conn:
                    await conn.execute(insert(Request), rows(base, args.unclaimed, "claim", pool))
            for i in range(base, base + args.unclaimed):
                (pool / f".{i:032X}.tssd-part").write_bytes(b"x")
            started = time.perf_counter()
            abandoned = await reaper.sweep()
            times.append(time.perf_counter() - started)
            assert abandoned == args.unclaimed, abandoned
        await engine.dispose()
    print(
        f"claimed={args.claimed} unclaimed/pass={args.unclaimed} passes={args.passes}: "
        f"sweep median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claimed", type=int, default=200_000)
    parser.add_argument("--unclaimed", type=int, default=20)
    parser.add_argument("--passes", type=int, default=20)
    asyncio.run(main(parser.parse_args()))

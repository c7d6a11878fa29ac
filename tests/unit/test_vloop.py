"""The virtual-time loop and the inline SQLite driver that keep simulations deterministic."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool

from tssd.simulate.vloop import Deadlock, inline_sqlite_creator, run_virtual


def test_sleeping_an_hour_takes_no_real_time_and_an_hour_of_loop_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600)
        return loop.time()

    assert run_virtual(main) == 3600.0


def test_timers_fire_in_virtual_order() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, float]] = []

        async def sleeper(name: str, seconds: float) -> None:
            await asyncio.sleep(seconds)
            seen.append((name, loop.time()))

        await asyncio.gather(sleeper("b", 20), sleeper("a", 10), sleeper("c", 30))
        return seen

    assert run_virtual(main) == [("a", 10.0), ("b", 20.0), ("c", 30.0)]


def test_database_work_happens_at_one_instant() -> None:
    async def main() -> tuple[int, float]:
        engine = create_async_engine(
            "sqlite+aiosqlite://",
            async_creator=inline_sqlite_creator(":memory:"),
            poolclass=StaticPool,
        )
        loop = asyncio.get_running_loop()
        try:
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE t (x INTEGER)"))
                for i in range(100):
                    await conn.execute(text("INSERT INTO t VALUES (:x)"), {"x": i})
            await asyncio.sleep(5)
            async with engine.connect() as conn:
                count = (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one()
        finally:
            await engine.dispose()
        return count, loop.time()

    assert run_virtual(main) == (100, 5.0)


def test_a_stuck_simulation_is_reported() -> None:
    async def main() -> None:
        await asyncio.Event().wait()

    with pytest.raises(Deadlock):
        run_virtual(main, stuck_after_s=0.2)

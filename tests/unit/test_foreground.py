"""The pools' calls go before the scheduler's catching up (tssd.work.Foreground).

Right after a bulk intake of a million recalls tssd locates its backlog for about a
minute; a pool's poll then shared the database and both cores with a stream of locate
batches (benchmarks/front_doors.py, "the poll call at depth"). Each batch now waits, for
a bounded moment, until no pool call is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from test_sched_on_memory import Library, submit, whole_scheduler

from tssd.db.memory import MemoryStore
from tssd.work import Foreground


async def test_quiet_does_not_wait_without_a_call_and_waits_for_the_last_one() -> None:
    foreground = Foreground()
    assert not await foreground.quiet(10.0)
    ended = []

    async def call(hold_s: float) -> None:
        with foreground.call():
            await asyncio.sleep(hold_s)
        ended.append(hold_s)

    calls = [asyncio.create_task(call(0.02)), asyncio.create_task(call(0.05))]
    await asyncio.sleep(0)
    assert foreground.busy
    assert await foreground.quiet(10.0)
    assert ended == [0.02, 0.05] and not foreground.busy
    await asyncio.gather(*calls)


async def test_quiet_gives_up_on_a_call_that_stays_in_flight() -> None:
    """The bound ends the wait: a call still in flight does not hold the backlog."""
    foreground = Foreground()
    with foreground.call():
        assert await foreground.quiet(0.01)
        assert foreground.busy
    assert not foreground.busy


async def test_a_call_that_fails_leaves_the_foreground() -> None:
    foreground = Foreground()
    try:
        with foreground.call():
            raise ValueError("the call failed")
    except ValueError:
        pass
    assert not foreground.busy


async def test_locating_waits_for_a_pool_call_in_flight_then_goes_on(
    memory_store: MemoryStore,
) -> None:
    """A locate batch starts only once the call in flight ended (or the bound passed);
    without a call the pass locates at once, as before."""
    library = Library({"00C1": [("V1", 1)], "00C2": [("V1", 2)]})
    scheduler, _, _ = whole_scheduler(memory_store, library)
    await scheduler.start()
    [first] = await submit(memory_store, "00C1")
    order: list[str] = []
    real = scheduler.intake.locate_recalls

    async def locate(busy: Iterable[str]) -> int:
        order.append("locate")
        return await real(busy)

    scheduler.intake.locate_recalls = locate  # type: ignore[method-assign]

    async def pool_call() -> None:
        with scheduler.work.foreground.call():
            await asyncio.sleep(0.05)
            order.append("call ended")

    call = asyncio.create_task(pool_call())
    await asyncio.sleep(0)
    await scheduler._locate_all(fresh=True)
    await call
    assert order[:2] == ["call ended", "locate"]
    assert (await memory_store.get(first)).volume == "V1"
    # No call in flight: the next batch does not wait.
    order.clear()
    [second] = await submit(memory_store, "00C2")
    await scheduler._locate_all(fresh=True)
    assert order == ["locate"] and (await memory_store.get(second)).volume == "V1"
    await scheduler.stop(1.0)

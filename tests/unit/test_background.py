"""A background loop lives for one ``async with`` block (tssd/background.py)."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from tssd.background import running


async def test_the_loop_runs_inside_the_block_and_is_cancelled_on_exit() -> None:
    ticks = 0
    stopped = asyncio.Event()

    async def loop() -> None:
        nonlocal ticks
        try:
            while True:
                ticks += 1
                await asyncio.sleep(0)
        finally:
            stopped.set()

    async with running(loop(), "ticker"):
        while ticks < 3:
            await asyncio.sleep(0)
    assert stopped.is_set()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "ticker"]


async def test_a_loop_that_dies_is_logged_at_once_and_not_raised_on_exit() -> None:
    died = asyncio.Event()

    async def loop() -> None:
        died.set()
        raise RuntimeError("disk on fire")

    with capture_logs() as logs:
        async with running(loop(), "purger"):
            await died.wait()
            await asyncio.sleep(0)  # the done callback runs on the next turn of the loop
            events = [e for e in logs if e["event"] == "background.died"]
            assert [(e["task"], "disk on fire" in e["error"]) for e in events] == [("purger", True)]
    assert len([e for e in logs if e["event"] == "background.died"]) == 1


async def test_a_cancelled_loop_is_not_reported_as_dead() -> None:
    with capture_logs() as logs:
        async with running(asyncio.sleep(3600), "sleeper"):
            await asyncio.sleep(0)
    assert not [e for e in logs if e["event"] == "background.died"]

"""The scheduler's work signal (tssd/work.py): what each waker notes, what a pass takes."""

from __future__ import annotations

import asyncio

from tssd.domain import Kind
from tssd.work import Noted, WorkSignal


def test_each_waker_notes_what_happened_until_the_scheduler_takes_it() -> None:
    work = WorkSignal()
    assert not work.is_set() and work.peek() == Noted()
    work.submitted([Kind.RECALL])
    work.submitted((Kind.RECALL, Kind.MIGRATE))
    assert work.is_set() and work.peek().only_submissions
    work.clear()  # a pass begins: the wake-up is seen, what was noted stays
    assert not work.is_set()
    assert work.peek().submitted == {Kind.RECALL, Kind.MIGRATE}
    work.queues_changed()
    assert not work.peek().only_submissions
    assert work.take() == Noted(frozenset({Kind.RECALL, Kind.MIGRATE}), queues=True)
    assert work.take() == Noted()
    work.requeued()
    assert work.take() == Noted(everything=True)


def test_a_nudge_wakes_without_noting_anything() -> None:
    work = WorkSignal()
    work.nudge()
    assert work.is_set() and work.peek() == Noted()
    assert not work.peek().only_submissions


async def test_the_scheduler_waits_until_woken() -> None:
    work = WorkSignal()
    waiting = asyncio.create_task(work.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    work.submitted([Kind.REMOVE])
    await asyncio.wait_for(waiting, 5.0)

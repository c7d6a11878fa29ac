"""Work that can never succeed ends (issue 17 point 5): the same-failure count of
tssd/retry.py and the batch cutting of tssd/scheduler/writable.py."""

from __future__ import annotations

from typing import Any

from tssd.backends.base import TapeBackend
from tssd.clock import RealClock
from tssd.db.models import Request
from tssd.errors import PermanentBackendError, TooLargeForTape
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.writable import WritableBatches


def retrier(same: int = 3) -> Retrier:
    return Retrier(RetryPolicy(same_failures=same), Metrics(), RealClock())


def test_gives_up_after_the_same_failure_n_times_in_a_row() -> None:
    r = retrier(3)
    full = PermanentBackendError("library full")
    assert [r.give_up(1, full) for _ in range(3)] == [False, False, True]
    # Counted afresh after giving up, and per request.
    assert not r.give_up(1, full)
    assert not r.give_up(2, full)


def test_a_different_failure_breaks_the_row() -> None:
    r = retrier(2)
    assert not r.give_up(1, PermanentBackendError("library full"))
    assert not r.give_up(1, PermanentBackendError("volume X is not in the library"))
    assert r.give_up(1, PermanentBackendError("volume X is not in the library"))
    # Same message, other type: not the same failure.
    assert not r.give_up(1, TooLargeForTape("volume X is not in the library"))


class OneTape:
    """A backend that knows no largest object size, and writes a batch to one tape."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.asked: list[int] = []

    async def max_object_size(self) -> int | None:
        return None

    async def writable_volume(self, storage_class: str, size: int) -> str:
        self.asked.append(size)
        if size > self.capacity:
            raise TooLargeForTape(f"{size} bytes: no tape holds more than {self.capacity}")
        return "SIM000L9"


class Writer(WritableBatches):
    def __init__(self, backend: Any) -> None:
        self.backend: TapeBackend = backend
        self.retrier = retrier()
        self.failed: list[tuple[int, str]] = []

    async def _fail(self, request: Request, exc: BaseException, **fields: Any) -> None:
        self.failed.append((request.id, type(exc).__name__))


def requests(*sizes: int) -> list[Request]:
    return [Request(id=i + 1, size=size, pnfsid=f"{i:02X}") for i, size in enumerate(sizes)]


async def test_a_batch_larger_than_a_tape_is_cut_down() -> None:
    writer = Writer(OneTape(100))
    batch = requests(40, 40, 40, 40)
    pending = {r.id: r for r in batch}
    volume, fits = await writer._volume_for("a:b", batch, pending)
    assert volume == "SIM000L9"
    assert [r.id for r in fits] == [1, 2]
    assert set(pending) == {1, 2, 3, 4}  # the cut-off ones go back to the queue
    assert writer.failed == []


async def test_a_single_request_no_tape_can_take_fails_at_once() -> None:
    writer = Writer(OneTape(100))
    batch = requests(101, 10)
    pending = {r.id: r for r in batch}
    volume, fits = await writer._volume_for("a:b", batch, pending)
    assert (volume, fits) == (None, [])
    assert writer.failed == [(1, "TooLargeForTape")]
    assert set(pending) == {2}


async def test_known_largest_object_fails_before_any_allocation() -> None:
    backend = OneTape(100)
    backend.max_object_size = _largest  # type: ignore[method-assign]
    writer = Writer(backend)
    batch = requests(10, 500, 20)
    pending = {r.id: r for r in batch}
    possible = await writer._possible(batch, pending)
    assert [r.id for r in possible] == [1, 3]
    assert writer.failed == [(2, "TooLargeForTape")]
    assert backend.asked == []


async def _largest() -> int:
    return 100


async def test_a_session_failing_the_same_way_ends_its_requests_on_the_nth_time() -> None:
    writer = Writer(OneTape(100))
    full = PermanentBackendError("library full")
    for attempt in (1, 2, 3):
        pending = {r.id: r for r in requests(10, 20)}
        ended = await writer._strike(pending, full)
        if attempt < 3:
            assert (ended, writer.failed, len(pending)) == ([], [], 2)
    assert [r.id for r in ended] == [1, 2] and pending == {}
    assert writer.failed == [(1, "PermanentBackendError"), (2, "PermanentBackendError")]

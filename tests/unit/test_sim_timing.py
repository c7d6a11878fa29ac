"""The simulated library's timing model, observed through a clock that records sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tssd.backends.base import ReadItem, ReadResult, TapeCopy, WriteItem
from tssd.backends.sim import PROFILES, SimLibrary, get_profile
from tssd.config import SimSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base, SimObject, SimTape
from tssd.files import CountingSink, FileSource

LTO9 = get_profile("lto9")
MB = 10**6
GB = 10**9


class RecordingClock:
    """Virtual time: every sleep is recorded and advances the clock at once."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)

    def wall(self) -> datetime:
        return datetime(2024, 1, 1, tzinfo=UTC)

    def take(self) -> list[float]:
        taken, self.sleeps = self.sleeps, []
        return taken


@pytest.fixture
def clock() -> RecordingClock:
    return RecordingClock()


@pytest.fixture
async def library(tmp_path: Path, clock: RecordingClock) -> AsyncIterator[SimLibrary]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        sessions = session_factory(engine)
        settings = SimSettings(drives=2, tapes=2, profile="lto9")
        lib = SimLibrary(settings, sessions, clock, tmp_path / "sim", time_scale=1.0)
        async with lib:
            # Imported objects (no bytes) spread over the tape: seq 1 and 2 are adjacent.
            layout = [(1, 0), (2, MB), (3, 5 * GB), (4, 9 * 10**12)]
            async with sessions() as session, session.begin():
                session.add_all(
                    SimObject(
                        bfid=f"b{seq}",
                        pnfsid=f"P{seq}",
                        volume="SIM000L9",
                        seq=seq,
                        offset=offset,
                        size=MB,
                        storage_class="atlas:tape",
                        has_data=False,
                    )
                    for seq, offset in layout
                )
                # An import also brings the tape's fill state up to date.
                tape = await session.get(SimTape, "SIM000L9")
                assert tape is not None
                tape.storage_class, tape.used, tape.next_seq = "atlas:tape", 9 * 10**12 + MB, 5
            yield lib
    finally:
        await engine.dispose()


async def copies(lib: SimLibrary, *seqs: int) -> list[TapeCopy]:
    found = await lib.locate([f"P{s}" for s in seqs])
    return [found[f"P{s}"][0] for s in seqs]


async def read(lib: SimLibrary, drive: str, items: list[TapeCopy]) -> list[ReadResult]:
    reads = [ReadItem(c, CountingSink()) for c in items]
    return [r async for r in lib.read(drive, reads)]


def test_profiles_exist() -> None:
    assert {"lto9", "lto8", "gridka-t10k"} <= set(PROFILES)


@given(
    head=st.integers(0, LTO9.capacity_bytes),
    near=st.integers(1, LTO9.capacity_bytes),
    extra=st.integers(0, LTO9.capacity_bytes),
    forward=st.booleans(),
)
def test_locate_cost_grows_with_distance(head: int, near: int, extra: int, forward: bool) -> None:
    cap = LTO9.capacity_bytes
    sign = 1 if forward else -1
    near_target, far_target = head + sign * near, head + sign * (near + extra)
    if not (0 <= near_target <= cap and 0 <= far_target <= cap):
        return
    near_s = LTO9.locate_s(head, near_target, cap)
    far_s = LTO9.locate_s(head, far_target, cap)
    assert near_s >= LTO9.locate_base_s
    # Farther is never cheaper, except that the nearer target may sit on another wrap.
    assert far_s + LTO9.wrap_change_s >= near_s
    if LTO9.wrap_of(near_target, cap) == LTO9.wrap_of(far_target, cap):
        assert far_s >= near_s


def test_locate_model_matches_vendor_average() -> None:
    cap = LTO9.capacity_bytes
    average = LTO9.locate_base_s + LTO9.locate_full_s / 3 + LTO9.wrap_change_s
    assert average == pytest.approx(45.0, abs=1.0)
    assert LTO9.locate_s(cap // 2, cap // 2, cap) == 0.0


async def test_mount_costs_robot_and_load(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    assert clock.take() == [LTO9.robot_s, LTO9.load_s]


async def test_remount_dismounts_first(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    await read(library, "drive0", await copies(library, 2))
    clock.take()
    await library.mount("drive0", "SIM001L9")
    rewind = LTO9.rewind_s(2 * MB, LTO9.capacity_bytes)
    assert rewind > LTO9.locate_base_s
    assert clock.take() == [rewind, LTO9.unload_s, LTO9.robot_s, LTO9.robot_s, LTO9.load_s]


async def test_dismount_at_bot_needs_no_rewind(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    clock.take()
    await library.dismount("drive0")
    assert clock.take() == [0.0, LTO9.unload_s, LTO9.robot_s]


async def test_read_locates_then_streams(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    clock.take()
    near, far = await read(library, "drive0", await copies(library, 3, 4))
    assert near.error is None and far.error is None
    assert 0 < near.locate_s < far.locate_s
    assert near.transfer_s == pytest.approx(MB / (LTO9.rate_mb_s * MB))
    assert clock.take()[:3] == [near.locate_s, LTO9.per_file_s, near.transfer_s]


async def test_next_file_costs_no_locate(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    first, second = await read(library, "drive0", await copies(library, 1, 2))
    assert first.locate_s == 0.0  # the head is at BOT after the load
    assert second.locate_s == 0.0
    # Going back costs a locate even though seq 1 is at the start of the tape.
    (again,) = await read(library, "drive0", await copies(library, 1))
    assert again.locate_s == LTO9.locate_s(2 * MB, 0, LTO9.capacity_bytes)


async def test_head_position_survives_between_reads(
    library: SimLibrary, clock: RecordingClock
) -> None:
    await library.mount("drive0", "SIM000L9")
    await read(library, "drive0", await copies(library, 1))
    (second,) = await read(library, "drive0", await copies(library, 2))
    assert second.locate_s == 0.0


async def test_time_scale_multiplies_every_delay(tmp_path: Path) -> None:
    clock = RecordingClock()
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = SimSettings(drives=1, tapes=1, profile="lto8")
        lib = SimLibrary(
            settings, session_factory(engine), clock, tmp_path / "sim", time_scale=0.01
        )
        async with lib:
            await lib.mount("drive0", "SIM000L8")
    finally:
        await engine.dispose()
    lto8 = get_profile("lto8")
    assert clock.sleeps == pytest.approx([lto8.robot_s * 0.01, lto8.load_s * 0.01])


async def test_one_robot_arm_serialises_moves(library: SimLibrary) -> None:
    active = 0
    most = 0
    robot_s = LTO9.robot_s

    class ArmClock(RecordingClock):
        async def sleep(self, seconds: float) -> None:
            nonlocal active, most
            if seconds != robot_s:
                await asyncio.sleep(0)
                return
            active += 1
            most = max(most, active)
            for _ in range(5):
                await asyncio.sleep(0)
            active -= 1

    library._clock = ArmClock()
    await asyncio.gather(library.mount("drive0", "SIM000L9"), library.mount("drive1", "SIM001L9"))
    assert most == 1
    assert {d.volume for d in await library.drives()} == {"SIM000L9", "SIM001L9"}


async def test_write_appends_at_end_of_data(
    library: SimLibrary, clock: RecordingClock, tmp_path: Path
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * MB)
    volume = await library.writable_volume("cms:tape", MB)
    assert volume == "SIM001L9"  # the other tape holds atlas imports
    await library.mount("drive0", volume)
    clock.take()
    items = [WriteItem(f"W{i}", "cms:tape", FileSource(path, MB)) for i in range(2)]
    results = [r async for r in library.write("drive0", items)]
    assert [r.copy.offset for r in results if r.copy] == [0, MB]
    transfer = MB / (LTO9.rate_mb_s * MB)
    assert results[0].transfer_s == pytest.approx(transfer)
    assert clock.take() == pytest.approx([0.0, LTO9.per_file_s, transfer] * 2)

"""The simulated library's timing model, observed through a clock that records sleeps."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tssd.backends.base import ReadItem, ReadResult, TapeCopy, WriteItem
from tssd.backends.sim import PROFILES, Profile, SimLibrary, get_profile
from tssd.backends.sim.media import SimDrive
from tssd.config import SimSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base, SimObject, SimTape
from tssd.db.sim_catalog import SimCatalogTables
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
        settings = SimSettings(drives=2, tapes=2, profile="lto9", layout_spread=0, file_spread=0)
        lib = SimLibrary(
            settings, SimCatalogTables(sessions), clock, tmp_path / "sim", time_scale=1.0
        )
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
    for profile in PROFILES.values():
        params = profile.as_dict()
        for key in ("rate_mb_s", "robot_s", "load_s", "unload_s", "rewind_full_s"):
            assert params[key] > 0
        assert params["bands"] >= 1 and params["wraps"] % params["bands"] == 0


def offset_at(profile: Profile, wrap: int, along: float, cap: int) -> int:
    """The byte offset on *wrap* at longitudinal position *along* (0 BOT, 1 EOT)."""
    into = along if wrap % 2 == 0 else 1.0 - along
    return wrap * profile.wrap_bytes(cap) + int(into * (profile.wrap_bytes(cap) - 1))


@given(
    wrap=st.integers(0, LTO9.wraps - 1),
    head=st.floats(0, 1),
    near=st.floats(0, 1),
    far=st.floats(0, 1),
)
def test_locate_cost_grows_with_distance_on_a_wrap(
    wrap: int, head: float, near: float, far: float
) -> None:
    cap = LTO9.capacity_bytes
    h, n, f = (offset_at(LTO9, wrap, x, cap) for x in (head, near, far))
    distance = sorted(
        (abs(LTO9.longitudinal(x, cap) - LTO9.longitudinal(h, cap)), x) for x in (n, f)
    )
    (_, closer), (_, farther) = distance
    assert LTO9.locate_s(h, farther, cap) >= LTO9.locate_s(h, closer, cap)
    if closer != h:
        assert LTO9.locate_s(h, closer, cap) >= LTO9.locate_base_s


def test_serpentine_layout() -> None:
    cap = LTO9.capacity_bytes
    wrap = LTO9.wrap_bytes(cap)
    assert LTO9.longitudinal(0, cap) == 0.0
    # Wrap 0 ends at EOT and wrap 1 starts there, running back to BOT.
    assert LTO9.longitudinal(wrap - 1, cap) == pytest.approx(1.0, abs=1e-6)
    assert LTO9.longitudinal(wrap, cap) == 1.0
    assert LTO9.longitudinal(2 * wrap - 1, cap) == pytest.approx(0.0, abs=1e-6)
    assert LTO9.wrap_of(wrap, cap) == 1 and LTO9.wrap_of(cap, cap) == LTO9.wraps - 1
    # So the next wrap is close: no travel, only the track change.
    assert LTO9.locate_s(wrap - 1, wrap + 1, cap) == pytest.approx(
        LTO9.locate_base_s + LTO9.wrap_change_s, abs=1e-3
    )
    # Seq order is not position order: the end of wrap 1 is nearer BOT than its start.
    assert LTO9.locate_s(0, 2 * wrap - 1, cap) < LTO9.locate_s(0, wrap, cap)


def test_wrap_change_costs_more_than_none_and_band_change_more() -> None:
    cap = LTO9.capacity_bytes
    per_band = LTO9.wraps // LTO9.bands
    head = offset_at(LTO9, 0, 0.2, cap)
    same_wrap = offset_at(LTO9, 0, 0.6, cap)
    other_wrap = offset_at(LTO9, 2, 0.6, cap)
    other_band = offset_at(LTO9, per_band, 0.6, cap)
    assert LTO9.band_of(other_wrap, cap) == 0 and LTO9.band_of(other_band, cap) == 1
    costs = [LTO9.locate_s(head, t, cap) for t in (same_wrap, other_wrap, other_band)]
    assert costs[0] < costs[1] < costs[2]
    assert costs[1] - costs[0] == pytest.approx(LTO9.wrap_change_s, abs=1e-3)
    assert costs[2] - costs[1] == pytest.approx(LTO9.band_change_s, abs=1e-3)


@pytest.mark.parametrize(("name", "vendor_avg_s"), [("lto9", 45.0), ("lto8", 59.0), ("lto7", 56.0)])
def test_locate_model_matches_vendor_average(name: str, vendor_avg_s: float) -> None:
    """IBM's "average locate" is from the load point (BOT) to a random file."""
    profile = get_profile(name)
    cap = profile.capacity_bytes
    rng = random.Random(1)
    targets = [rng.randrange(cap) for _ in range(20_000)]
    average = sum(profile.locate_s(0, t, cap) for t in targets) / len(targets)
    assert average == pytest.approx(vendor_avg_s, rel=0.02)
    assert profile.locate_s(cap // 2, cap // 2, cap) == 0.0


def test_unload_rewind_follows_the_published_steps() -> None:
    """IBM (TS4500 / Diamondback "Performance specifications for LTO tape drives", LTO-9,
    https://www.ibm.com/docs/en/dtl/2.12.3?topic=performance-lto-specifications):
    rewind as part of UNLOAD 55 s below 5 GB of contiguous data transferred, 110 s from
    5 GB to 50 GB, 165 s for all other mount activity."""
    cap, gb = LTO9.capacity_bytes, 10**9
    assert LTO9.unload_rewind_s(0, cap, 0) == 0.0  # never moved
    assert [LTO9.unload_rewind_s(n, cap, n) for n in (1, 5 * gb - 1, 5 * gb, 50 * gb - 1)] == [
        55.0, 55.0, 110.0, 110.0
    ]  # fmt: skip
    assert LTO9.unload_rewind_s(50 * gb, cap, 50 * gb) == 165.0
    assert LTO9.unload_rewind_s(gb, cap, None) == 165.0  # a locate: other activity
    # Without published steps, the rewind follows the head.
    lto8 = get_profile("lto8")
    assert lto8.unload_rewind_s(0, lto8.capacity_bytes, None) == lto8.rewind_s(0, cap)


def test_a_drive_counts_contiguous_data_until_it_locates() -> None:
    drive = SimDrive("d0", volume="V", capacity=LTO9.capacity_bytes)
    drive.move(0, 1000)
    drive.move(1000, 3000)  # the next object on tape: no locate
    assert drive.contiguous == 3000
    drive.move(5000, 6000)  # a locate past the bytes between
    assert drive.contiguous is None
    drive.move(6000, 7000)
    assert drive.contiguous is None  # once scattered, for the rest of the mount


def test_rewind_grows_with_head_position() -> None:
    cap = LTO9.capacity_bytes
    quarter, half = offset_at(LTO9, 0, 0.25, cap), offset_at(LTO9, 0, 0.5, cap)
    assert LTO9.rewind_s(0, cap) == 0.0
    assert 0 < LTO9.rewind_s(quarter, cap) < LTO9.rewind_s(half, cap) <= LTO9.rewind_full_s
    # Back at BOT at the end of an odd wrap: nothing to rewind.
    assert LTO9.rewind_s(2 * LTO9.wrap_bytes(cap) - 1, cap) == pytest.approx(0.0, abs=1e-3)


async def test_mount_costs_robot_and_load(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    assert clock.take() == [LTO9.robot_s, LTO9.load_s]


async def test_remount_dismounts_first(library: SimLibrary, clock: RecordingClock) -> None:
    await library.mount("drive0", "SIM000L9")
    await read(library, "drive0", await copies(library, 1, 2))
    clock.take()
    await library.mount("drive0", "SIM001L9")
    rewind = LTO9.rewind_steps_s[0]  # a few MB read from BOT on: IBM's first step
    assert clock.take() == [rewind, LTO9.unload_s, LTO9.robot_s, LTO9.robot_s, LTO9.load_s]
    await library.mount("drive0", "SIM000L9")
    await read(library, "drive0", await copies(library, 2))  # a locate past P1
    clock.take()
    await library.dismount("drive0")
    assert clock.take()[0] == LTO9.rewind_steps_s[-1]  # any other activity: the last step


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
        settings = SimSettings(drives=1, tapes=1, profile="lto8", layout_spread=0, file_spread=0)
        lib = SimLibrary(
            settings,
            SimCatalogTables(session_factory(engine)),
            clock,
            tmp_path / "sim",
            time_scale=0.01,
        )
        async with lib:
            await lib.mount("drive0", "SIM000L8")
    finally:
        await engine.dispose()
    lto8 = get_profile("lto8")
    assert clock.sleeps == pytest.approx([lto8.robot_s * 0.01, lto8.load_s * 0.01])


class EventClock(RecordingClock):
    """Discrete-event virtual time: sleepers wake in time order, each once all is idle."""

    def __init__(self) -> None:
        super().__init__()
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.t + seconds, next(self._order), wake))
        await wake

    async def run(self, *work: Any) -> float:
        """Run *work* concurrently to the end; return the virtual time it took."""
        started = self.t
        tasks = [asyncio.ensure_future(w) for w in work]
        while not all(t.done() for t in tasks):
            for _ in range(20):  # let every task run until it waits on the clock
                await asyncio.sleep(0)
            if self._timers:
                self.t, _, wake = heapq.heappop(self._timers)
                wake.set_result(None)
        await asyncio.gather(*tasks)
        return self.t - started


async def mount_three(tmp_path: Path, arms: int) -> float:
    """Virtual seconds until three drives have mounted three cartridges at once."""
    clock = EventClock()
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / f'arms{arms}.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = SimSettings(drives=3, tapes=3, profile="lto9", robot_arms=arms)
        lib = SimLibrary(
            settings,
            SimCatalogTables(session_factory(engine)),
            clock,
            tmp_path / "sim",
            time_scale=1.0,
        )
        async with lib:
            known = {t: await lib._catalog.tape(t) for t in ("SIM000L9", "SIM001L9", "SIM002L9")}

            async def tape(volume: str) -> Any:
                # Served from memory so that no database thread runs while time is virtual.
                return known[volume]

            lib._catalog.tape = tape  # type: ignore[method-assign]
            took = await clock.run(*(lib.mount(f"drive{i}", f"SIM00{i}L9") for i in range(3)))
            assert {d.volume for d in await lib.drives()} == set(known)
            return took
    finally:
        await engine.dispose()


async def test_robot_arms_are_contended(tmp_path: Path) -> None:
    one, two, three = [await mount_three(tmp_path, arms) for arms in (1, 2, 3)]
    # Free arms: every mount costs robot + load, all at once.
    assert three == pytest.approx(LTO9.robot_s + LTO9.load_s)
    # The third cartridge waits for an arm; with one arm all three queue for it.
    assert two == pytest.approx(2 * LTO9.robot_s + LTO9.load_s)
    assert one == pytest.approx(3 * LTO9.robot_s + LTO9.load_s)
    assert one > two > three


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

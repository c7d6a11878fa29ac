"""IBM SP semantics of the simulated library: restore order, media class, copies, one
session per volume, and error injection with the real return codes."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.base import ReadItem, WriteItem
from tssd.backends.sim import SimLibrary
from tssd.backends.sim.catalog_csv import import_csv
from tssd.backends.sim.faults import PERMANENT_CODES, TRANSIENT_CODES, FaultInjector
from tssd.clock import RealClock
from tssd.config import SimSettings
from tssd.db.sim_catalog import SimCatalogTables
from tssd.errors import (
    ConfigError,
    ObjectNotFound,
    PermanentBackendError,
    TransientBackendError,
)
from tssd.files import CountingSink, FileSource
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy

GB = 10**9
HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"


def make_library(sessions: async_sessionmaker[Any], tmp_path: Path, **overrides: Any) -> SimLibrary:
    settings = dataclasses.replace(SimSettings(drives=3, tapes=0), **overrides)
    return SimLibrary(
        settings, SimCatalogTables(sessions), RealClock(), tmp_path / "sim", time_scale=0.0
    )


def shuffled_catalog(volumes: int, per_volume: int, seed: int = 3) -> str:
    rows = [
        f"{v:04X}{s:08X},VOL{v:03d},{s},{(s % 5 + 1) * GB},atlas:tape,2020-01-01T00:00:00+00:00"
        for v in range(volumes)
        for s in range(1, per_volume + 1)
    ]
    random.Random(seed).shuffle(rows)
    return HEADER + "\n".join(rows) + "\n"


# -- restore order, media, copies --------------------------------------------------------


async def test_restore_order_sorts_a_tapes_objects_by_position(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    await import_csv(SimCatalogTables(sessions), io.StringIO(shuffled_catalog(3, 40)), replace=True)
    async with make_library(sessions, tmp_path) as lib:
        placements = await lib.placements()
        found = await lib.locate([p.pnfsid for p in placements])
    copies = sorted((c for cs in found.values() for c in cs), key=lambda c: c.restore_order)
    assert len(copies) == 120
    for volume in ("VOL000", "VOL001", "VOL002"):
        on_tape = [c for c in copies if c.volume == volume]
        # Restore order is tape order: sequence and byte offset both ascend.
        assert [c.position for c in on_tape] == list(range(1, 41))
        assert [c.offset for c in on_tape] == sorted(c.offset for c in on_tape)
        assert all(a.offset + a.size == b.offset for a, b in itertools.pairwise(on_tape))
    # The volume comes first: a tape's objects are contiguous in restore order.
    assert [c.volume for c in copies] == sorted(c.volume for c in copies)


async def test_copies_report_media_and_written_time(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    csv_text = HEADER + (
        "00AA,VOL001,1,10,atlas:tape,2019-01-01T00:00:00+00:00\n"
        "00AA,VOL002,7,10,atlas:tape,2019-06-01T00:00:00+00:00\n"
        "00AA,VOL003,2,10,atlas:tape,2019-03-01T00:00:00+00:00\n"
        "00BB,VOL002,1,10,atlas:tape,2019-01-01T00:00:00+00:00\n"
    )
    await import_csv(SimCatalogTables(sessions), io.StringIO(csv_text), replace=True)
    async with make_library(sessions, tmp_path) as lib:
        found = await lib.locate(["00AA", "00BB", "00CC"])
    assert set(found) == {"00AA", "00BB"}
    copies = found["00AA"]
    # Every copy, oldest first, each with its own written time and the tape media class.
    assert [(c.volume, c.position) for c in copies] == [("VOL001", 1), ("VOL003", 2), ("VOL002", 7)]
    assert [c.written_at.month for c in copies] == [1, 3, 6]
    assert {c.media for c in copies} == {"tape"}
    assert len({c.bfid for c in copies}) == 3


# -- one session per volume ----------------------------------------------------------------


async def test_a_session_never_runs_twice_on_one_volume(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    await import_csv(SimCatalogTables(sessions), io.StringIO(shuffled_catalog(1, 5)), replace=True)
    async with make_library(sessions, tmp_path) as lib:
        outcomes = await asyncio.gather(
            *(lib.mount(f"drive{i}", "VOL000") for i in range(3)), return_exceptions=True
        )
        refused = [o for o in outcomes if isinstance(o, TransientBackendError)]
        assert outcomes.count(None) == 1 and len(refused) == 2
        assert {e.code for e in refused} == {12}  # mount not possible
        holders = [d.name for d in await lib.drives() if d.volume == "VOL000"]
        assert len(holders) == 1
        others = [d.name for d in await lib.drives() if d.name not in holders]
        copies = (await lib.locate(["000000000001"]))["000000000001"]
        # A drive without the volume cannot read it: no second session on the volume.
        for drive in others:
            with pytest.raises(TransientBackendError):
                [r async for r in lib.read(drive, [ReadItem(copies[0], CountingSink())])]
        # Once the holder lets go, another drive may take the volume.
        await lib.dismount(holders[0])
        await lib.mount(others[0], "VOL000")
        results = [r async for r in lib.read(others[0], [ReadItem(copies[0], CountingSink())])]
        assert results[0].error is None and results[0].nbytes == copies[0].size


# -- error injection -----------------------------------------------------------------------


def test_injected_errors_follow_the_rates_with_real_codes() -> None:
    n = 20_000
    faults = FaultInjector(transient_rate=0.1, permanent_rate=0.05, seed=11)
    drawn = [faults.draw("read", f"P{i}") for i in range(n)]
    transient = [e for e in drawn if isinstance(e, TransientBackendError)]
    permanent = [e for e in drawn if isinstance(e, PermanentBackendError)]
    # Binomial standard deviations are about 42 and 31: allow five.
    assert abs(len(transient) - 0.1 * n) < 210
    assert abs(len(permanent) - 0.05 * n) < 155
    assert {e.code for e in transient} == set(TRANSIENT_CODES["read"])
    assert {e.code for e in permanent} == set(PERMANENT_CODES["read"])
    assert all(isinstance(e, ObjectNotFound) == (e.code in (2, 2063)) for e in permanent)
    # Mounts have no permanent failure, and still fail at the transient rate.
    mounts = FaultInjector(transient_rate=0.1, permanent_rate=0.05, seed=11)
    failed = [e for e in (mounts.draw("mount", "V") for _ in range(n)) if e is not None]
    assert abs(len(failed) - 0.1 * n) < 210
    assert all(isinstance(e, TransientBackendError) for e in failed)


def test_injected_errors_are_deterministic_by_seed() -> None:
    def codes(seed: int) -> list[int | None]:
        faults = FaultInjector(transient_rate=0.2, permanent_rate=0.1, seed=seed)
        return [e.code if e else None for e in (faults.draw("write", "P") for _ in range(500))]

    assert codes(5) == codes(5)
    assert codes(5) != codes(6)
    assert FaultInjector(0.0, 0.0, 1).draw("read", "P") is None
    with pytest.raises(ConfigError):
        FaultInjector(0.7, 0.4, 1)


async def test_library_reports_injected_errors(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    await import_csv(
        SimCatalogTables(sessions), io.StringIO(shuffled_catalog(1, 200)), replace=True
    )

    async def run(seed: int) -> list[tuple[str, int | None]]:
        lib = make_library(
            sessions, tmp_path, transient_error_rate=0.2, permanent_error_rate=0.1, seed=seed
        )
        async with lib:
            retrier = Retrier(RetryPolicy(attempts=100, base_s=0.0), Metrics(), RealClock())
            # Mount failures are raised, with their code, for tssd.retry to retry.
            await retrier.call("mount", lambda: lib.mount("drive0", "VOL000"))
            placements = sorted(await lib.placements(), key=lambda p: p.position)
            found = await lib.locate([p.pnfsid for p in placements])
            items = [ReadItem(found[p.pnfsid][0], CountingSink()) for p in placements]
            results = [r async for r in lib.read("drive0", items)]
        return [
            (type(r.error).__name__, getattr(r.error, "code", None))
            for r in results
            if r.error is not None
        ]

    errors = await run(seed=4)
    # Read failures are per item: the session goes on with the next file.
    kinds = Counter(kind for kind, _ in errors)
    assert 20 <= kinds["TransientBackendError"] <= 60
    assert 5 <= kinds["ObjectNotFound"] + kinds["PermanentBackendError"] <= 40
    assert {code for _, code in errors} <= set(TRANSIENT_CODES["read"]) | {2, 124, 2063}
    assert await run(seed=4) == errors


async def test_write_reports_injected_errors(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    lib = make_library(sessions, tmp_path, tapes=2, transient_error_rate=1.0)
    async with lib:
        volume = await lib.writable_volume("atlas:tape", 1000)
        with pytest.raises(TransientBackendError) as raised:
            await lib.mount("drive0", volume)
        assert raised.value.code in TRANSIENT_CODES["mount"]
    # Nothing was left claimed by the failed mount: a healthy library mounts and writes.
    lib = make_library(sessions, tmp_path, tapes=2, permanent_error_rate=1.0)
    async with lib:
        await lib.mount("drive0", volume)
        item = WriteItem("00AB", "atlas:tape", FileSource(path, 1000))
        (result,) = [r async for r in lib.write("drive0", [item])]
    assert isinstance(result.error, PermanentBackendError) and result.error.code == 124
    assert result.copy is None

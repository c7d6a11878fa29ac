"""The simulated library keeps its true layout to itself (issue 18.2, 18.8).

The scheduler gets the media type's nominal geometry at the volume's own capacity and
the catalog's offsets (sizes of the objects before a copy); the library locates to where
the bytes truly are, which differs by a per-tape and a per-file factor (layout.py).
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.base import ReadItem
from tssd.backends.sim import SimLibrary
from tssd.backends.sim.layout import physical_offsets, tape_factor
from tssd.clock import RealClock
from tssd.config import SimSettings
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.db.sim_catalog import SimCatalogTables
from tssd.files import CountingSink
from tssd.tape.geometry import LTO9

GB = 10**9
TB = 10**12


def test_no_spread_is_the_catalog() -> None:
    objects = [(1, 0, 5 * GB), (2, 5 * GB, GB), (4, 7 * GB, GB)]  # seq 3 deleted
    assert physical_offsets("V1", objects, 0, 0, 0) == [
        (0, 5 * GB), (5 * GB, 6 * GB), (7 * GB, 8 * GB)
    ]  # fmt: skip


def test_spread_is_bounded_repeatable_and_contiguous() -> None:
    objects = [(s, (s - 1) * 2 * GB, 2 * GB) for s in range(1, 1001)]
    factors = [tape_factor(f"V{i}", 0.03, 7) for i in range(200)]
    assert all(0.97 <= f <= 1.03 for f in factors)
    assert max(factors) - min(factors) > 0.04  # they do differ between tapes
    a = physical_offsets("V1", objects, 0.03, 0.02, 7)
    assert a == physical_offsets("V1", objects, 0.03, 0.02, 7)
    assert a != physical_offsets("V1", objects, 0.03, 0.02, 8)
    assert all(a[i][1] == a[i + 1][0] for i in range(len(a) - 1))  # still adjacent
    end = a[-1][1]
    factor = tape_factor("V1", 0.03, 7)
    # Per-file noise averages out along the tape; the per-tape factor does not.
    assert end / (2000 * GB) == pytest.approx(factor, rel=0.005)


async def test_scheduler_sees_nominal_geometry_at_the_tapes_capacity(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    settings = SimSettings(drives=1, tapes=0, tape_capacity=9 * TB)
    lib = SimLibrary(
        settings, SimCatalogTables(sessions), RealClock(), tmp_path / "sim", time_scale=0.0
    )
    async with lib:
        rows = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
            f"{s:04X},V1,{s},{100 * GB},a:b,2020-01-01T00:00:00\n" for s in range(1, 41)
        )
        await lib.import_catalog(io.StringIO(rows), replace=True)
        geometry = await lib.geometry("V1")
        assert geometry is not None
        assert geometry.capacity_bytes == 9 * TB  # the tape's, not the profile's 18 TB
        # The nominal model, and how far its estimates may be off (the tape factor's range).
        assert geometry.position_spread == settings.layout_spread
        nominal = dataclasses.replace(
            geometry, capacity_bytes=LTO9.capacity_bytes, position_spread=0
        )
        assert nominal == LTO9
        assert lib.timing() == LTO9
        assert await lib.geometry("NOPE") is None
        # The copy's offset is the catalog's estimate; the library reads the truth.
        copy = (await lib.locate(["0028"]))["0028"][0]
        assert copy.offset == 39 * 100 * GB
        await lib.mount("drive0", "V1")
        (result,) = [r async for r in lib.read("drive0", [ReadItem(copy, CountingSink())])]
        estimated = LTO9.locate_s(0, copy.offset, 9 * TB)
        assert result.error is None
        assert result.locate_s != pytest.approx(estimated, abs=0.01)


async def test_scsi_geometry_from_configured_media_or_barcode(
    sessions: async_sessionmaker[Any],
) -> None:
    from tssd.backends.scsi.library import ScsiLibrary
    from tssd.config import ScsiSettings
    from tssd.errors import ConfigError
    from tssd.tape.geometry import ESTIMATE_SPREAD, LTO8, media_profile

    def nominal(profile: object) -> object:
        return dataclasses.replace(profile, position_spread=0)  # type: ignore[type-var]

    by_barcode = ScsiLibrary(ScsiSettings(), ScsiCatalogTables(sessions), RealClock())
    guessed = await by_barcode.geometry("ABC123L9")
    assert guessed is not None and guessed.position_spread == ESTIMATE_SPREAD
    assert nominal(guessed) == LTO9
    assert await by_barcode.geometry("ABC123") is None  # unknown: position order
    assert by_barcode.timing() is None
    configured = ScsiLibrary(ScsiSettings(media="lto8"), ScsiCatalogTables(sessions), RealClock())
    assert nominal(await configured.geometry("ABC123L9")) == LTO8
    assert configured.timing() == LTO8
    assert media_profile("X", "3592") is not None
    with pytest.raises(ConfigError, match=r"scsi\.media"):
        ScsiLibrary(ScsiSettings(media="dlt"), ScsiCatalogTables(sessions), RealClock())

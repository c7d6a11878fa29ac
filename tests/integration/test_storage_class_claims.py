"""Storage classes grab cartridges (the attack): 1-byte migrations in invented storage
classes took a whole empty cartridge each, on the simulated library and on the SCSI
emulation, until a real class's put failed "library full". A class no
``[[storage_classes]]`` table admits is refused at submit and claims no cartridge; the
classes of a pattern hold at most its ``max_tapes`` together."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.backends.base import TapeBackend
from tssd.backends.scsi.library import ScsiLibrary, emulated_settings
from tssd.backends.sim import SimLibrary
from tssd.clock import RealClock
from tssd.config import ApiSettings, DatabaseSettings, ScsiSettings, Settings, SimSettings
from tssd.config.storage_classes import (
    DEFAULT_STORAGE_CLASSES,
    StorageClassSettings,
    load_storage_classes,
)
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base
from tssd.db.scsi_catalog import ScsiCatalogTables
from tssd.db.sim_catalog import SimCatalogTables
from tssd.errors import PermanentBackendError

MiB = 1024 * 1024
TAPES = 4
Tables = tuple[StorageClassSettings, ...]
Factory = Callable[[Path, Tables], AbstractAsyncContextManager[TapeBackend]]


@asynccontextmanager
async def sim(tmp: Path, tables: Tables) -> AsyncIterator[TapeBackend]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = SimSettings(drives=1, tapes=TAPES, tape_capacity=64 * MiB)
        catalog = SimCatalogTables(session_factory(engine))
        async with SimLibrary(settings, catalog, RealClock(), tmp / "sim",
                              time_scale=0.0, storage_classes=tables) as library:  # fmt: skip
            yield library
    finally:
        await engine.dispose()


@asynccontextmanager
async def scsi(tmp: Path, tables: Tables) -> AsyncIterator[TapeBackend]:
    """tssd/backends/scsi/emulated.py: the mtx emulator and file-backed drives."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp / 'tssd.db'}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        settings = emulated_settings(
            ScsiSettings(block_size=64 * 1024, tape_capacity=64 * MiB, emulation_drives=1,
                         emulation_tapes=TAPES, emulation_capacity=64 * MiB),
            tmp / "vtl",
        )  # fmt: skip
        async with ScsiLibrary(
            settings, ScsiCatalogTables(session_factory(engine)), RealClock(), tables
        ) as library:
            yield library
    finally:
        await engine.dispose()


BACKENDS = [pytest.param(sim, id="sim"), pytest.param(scsi, id="scsi")]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_invented_classes_claim_no_cartridge_on_the_default(
    tmp_path: Path, backend: Factory
) -> None:
    async with backend(tmp_path, DEFAULT_STORAGE_CLASSES) as library:
        for n in range(TAPES + 2):  # more invented classes than the library has tapes
            with pytest.raises(PermanentBackendError, match="no \\[\\[storage_classes\\]\\]"):
                await library.writable_volume(f"junk:c{n}", 1)
        # The configured class still finds its empty cartridge.
        assert await library.writable_volume("atlas:tape", 1)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_classes_of_a_pattern_share_its_max_tapes(
    tmp_path: Path, backend: Factory
) -> None:
    tables = load_storage_classes([{"name": "atlas:tape"}, {"name": "user:*", "max_tapes": 2}])
    async with backend(tmp_path, tables) as library:
        first = await library.writable_volume("user:a", 1)
        second = await library.writable_volume("user:b@osm", 1)
        assert second != first
        assert await library.writable_volume("user:a", 1) == first  # its own, filling
        for n in range(TAPES):
            with pytest.raises(PermanentBackendError, match="max_tapes = 2"):
                await library.writable_volume(f"user:c{n}", 1)
        # Two cartridges of four are the pattern's: the named class has its own.
        assert await library.writable_volume("atlas:tape", 1) not in (first, second)


async def test_a_migration_of_an_unlisted_class_is_refused_at_submit(tmp_path: Path) -> None:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'tssd.db'}"),
        sim=SimSettings(drives=0, tapes=0),
        api=ApiSettings(pool_roots="/"),
    )
    src = tmp_path / "f"
    src.write_bytes(b"x")

    def put(n: int, storage_class: str) -> dict[str, object]:
        return {"kind": "migrate", "pnfsid": f"00BB{n:04d}", "path": str(src), "size": 1,
                "storage_class": storage_class}  # fmt: skip

    async with (
        build_services(settings) as svc,
        TestClient(TestServer(make_app(svc))) as client,
    ):
        refused = await client.post("/v1/requests", json=put(1, "junk:x"))
        assert refused.status == 403
        error = (await refused.json())["error"]
        assert error["type"] == "StorageClassRefused" and error["exit_code"] == 1
        assert "[[storage_classes]]" in error["message"] and "'junk:x'" in error["message"]
        bulk = {"requests": [put(2, "atlas:tape"), put(3, "junk:y")]}
        refused = await client.post("/v1/requests/bulk", json=bulk)
        assert refused.status == 403
        assert "request 1:" in (await refused.json())["error"]["message"]
        obtain = put(4, "junk:z") | {"adopt": "open"}
        assert (await client.post("/v1/requests/obtain", json=obtain)).status == 403
        assert (await client.get("/v1/requests")).status == 200
        assert (await (await client.get("/v1/requests")).json())["requests"] == []
        accepted = await client.post("/v1/requests", json=put(5, "atlas:tape@osm"))
        assert accepted.status == 201, await accepted.text()

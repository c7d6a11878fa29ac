"""The SP backend (tssd/backends/sp) on the stand-in library: faults, MAXNUMMP, the
admin client's volume names, duplicates and the session threads.

The stand-in models IBM's libApiTSM64.so as GSI-HPC/ltsm ``src/lib/tsmapi.c`` calls it
(tssd/backends/sp/standin); its server directory is shared with raw API sessions
(tests/sp_fixtures.py) playing other clients of the same node.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.integration.test_backend_contract import make_file, pnfsid
from tests.sp_fixtures import ApiClient
from tssd.backends.base import ReadItem, ReadResult, TapeCopy, WriteItem
from tssd.backends.duplicates import duplicates_report
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.library import SpLibrary
from tssd.backends.sp.naming import encode_objinfo
from tssd.backends.sp.standin import LIBRARY_NAME, ServerSettings, make_server
from tssd.clock import RealClock
from tssd.config import SpSettings
from tssd.errors import ConfigError, TransientBackendError
from tssd.files import FileSink, FileSource
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.copies import cover_copies

pytestmark = pytest.mark.sp

SC = "atlas:tape"
KiB = 1024


@asynccontextmanager
async def sp_library(
    build: Path, server: Path, mount_points: int = 2, **overrides: object
) -> AsyncIterator[SpLibrary]:
    settings = SpSettings(
        api_library=str(build / LIBRARY_NAME),
        options_file=str(server / "dsm.opt"),
        node="TSSD",
        max_mount_points=mount_points,
        volume_capacity=1 << 30,
        buffer_size=16 * KiB,
        **overrides,  # type: ignore[arg-type]
    )
    async with SpLibrary(settings) as library:
        yield library


def server(tmp: Path, **settings: object) -> Path:
    make_server(tmp / "server", ServerSettings(**settings))  # type: ignore[arg-type]
    return tmp / "server"


async def archive(
    library: SpLibrary, pool: Path, sizes: list[int], start: int = 0
) -> list[TapeCopy]:
    items = []
    for i, size in enumerate(sizes, start):
        path, adler = make_file(pool, f"in{i}", size)
        items.append(WriteItem(pnfsid(i), SC, FileSource(path, size), adler))
    drive = (await library.drives())[0].name
    await library.mount(drive, await library.writable_volume(SC, sum(sizes)))
    results = [r async for r in library.write(drive, items)]
    assert [r.error for r in results] == [None] * len(items)
    await library.dismount(drive)
    return [r.copy for r in results if r.copy is not None]


async def read(
    library: SpLibrary, drive: str, copies: list[TapeCopy], out: Path
) -> list[ReadResult]:
    await library.mount(drive, copies[0].volume)
    items = [ReadItem(copy, FileSink(out / copy.pnfsid)) for copy in copies]
    return [r async for r in library.read(drive, items)]


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    (tmp_path / "pool").mkdir()
    (tmp_path / "out").mkdir()
    return tmp_path / "pool"


async def test_a_transient_code_storm_is_retried_and_counted(
    sp_build: Path, tmp_path: Path, pool: Path
) -> None:
    """Half the sign-ons and retrieves fail with mount not possible, data unavailable or
    MAXNUMMP exceeded: tssd.retry retries them (counted) and every byte comes back."""
    srv = server(tmp_path)
    async with sp_library(sp_build, srv) as library:
        copies = await archive(library, pool, [10 * KiB, 70 * KiB, 1] * 4)
    metrics = Metrics()
    retrier = Retrier(RetryPolicy(attempts=60, base_s=0.0, max_s=0.0), metrics, RealClock())
    async with sp_library(sp_build, srv) as library:
        # The storm begins once the catalog session is signed on (a daemon retries its
        # start-up elsewhere); the drive session signs on into it.
        make_server(srv, ServerSettings(transient_rate=0.5, transient_codes=(12, 14, 41)))
        for copy in copies:

            async def recall(copy: TapeCopy = copy) -> ReadResult:
                (result,) = await read(library, "sp0", [copy], tmp_path / "out")
                if result.error is not None:
                    raise result.error
                return result

            assert (await retrier.call("read", recall)).nbytes == copy.size
    for i, copy in enumerate(copies):
        assert (tmp_path / "out" / copy.pnfsid).read_bytes() == (pool / f"in{i}").read_bytes()
    assert metrics.backend_retries_total._value.get() > 0


async def test_a_session_lost_mid_retrieve_signs_on_again(
    sp_build: Path, tmp_path: Path, pool: Path
) -> None:
    """The server drops the session after two objects: the read breaks off with a
    transient error, nothing half-written is left, and the next read signs on again."""
    srv = server(tmp_path)
    async with sp_library(sp_build, srv) as library:
        copies = await archive(library, pool, [20 * KiB] * 5)
    make_server(srv, ServerSettings(drop_after_objects=2, drop_sessions=1))
    out = tmp_path / "out"
    async with sp_library(sp_build, srv) as library:
        done: list[ReadResult] = []
        with pytest.raises(TransientBackendError) as lost:
            await library.mount("sp0", copies[0].volume)
            items = [ReadItem(copy, FileSink(out / copy.pnfsid)) for copy in copies]
            async for result in library.read("sp0", items):
                done.append(result)
        assert lost.value.code == c.DSM_RC_TCPIP_FAILURE
        assert [r.error for r in done] == [None, None]
        assert sorted(p.name for p in out.iterdir()) == sorted(c.pnfsid for c in copies[:2])
        again = [
            r
            async for r in library.read(
                "sp0", [ReadItem(c, FileSink(out / c.pnfsid)) for c in copies[2:]]
            )
        ]
        assert [r.error for r in again] == [None] * 3
    for i, copy in enumerate(copies):
        assert (out / copy.pnfsid).read_bytes() == (pool / f"in{i}").read_bytes()


async def test_max_mount_points_exhausted_is_transient(
    sp_build: Path,
    tmp_path: Path,
    pool: Path,
    sp_client: Callable[[], ApiClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another session of the node holds the one mount point (MAXNUMMP 1): a retrieve
    that may not wait fails with 41, transient; once it is free the same read succeeds."""
    srv = server(tmp_path, max_mount_points=1)
    monkeypatch.setenv("DSMI_CONFIG", str(srv / "dsm.opt"))
    async with sp_library(sp_build, srv, mount_wait=False) as library:
        copies = await archive(library, pool, [5 * KiB])
        other = sp_client()
        other.begin_get([int(copies[0].bfid.removeprefix("sp."))])
        with pytest.raises(TransientBackendError) as caught:
            await read(library, "sp0", copies, tmp_path / "out")
        assert caught.value.code == c.DSM_RC_ABORT_EXCEED_MAX_MP
        other.end_get()
        results = await read(library, "sp0", copies, tmp_path / "out")
    assert [r.error for r in results] == [None]


async def test_volume_names_come_from_the_admin_client(
    sp_build: Path, tmp_path: Path, pool: Path
) -> None:
    srv = server(tmp_path, capacity_bytes=64 * KiB, volume_suffix="L9")
    admin = f"{sp_build / 'dsmadmc'} -optfile={srv / 'dsm.opt'} -dataonly=yes -comma"
    async with sp_library(sp_build, srv, admin_command=admin) as library:
        copies = await archive(library, pool, [40 * KiB] * 3)
    assert [c.volume for c in copies] == ["SP0001L9", "SP0002L9", "SP0003L9"]
    async with sp_library(sp_build, srv) as library:
        keyed = await library.locate([c.pnfsid for c in copies])
    # Without an admin client a volume is its restore-order key, one per volume.
    assert len({cs[0].volume for cs in keyed.values()}) == 3
    assert all(cs[0].volume.startswith("SP0000") for cs in keyed.values())


async def test_duplicates_feed_the_copy_choice_as_on_sim(
    sp_build: Path,
    tmp_path: Path,
    sp_client: Callable[[], ApiClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Files archived twice by an earlier client (dCache re-writing unacknowledged
    stores): the catalog answers every copy, and the copy choice reads the originals on
    one volume, as it does on the simulated library's catalog."""
    srv = server(tmp_path, capacity_bytes=32 * KiB)
    monkeypatch.setenv("DSMI_CONFIG", str(srv / "dsm.opt"))
    client = sp_client()
    data = [bytes([i]) * 8 * KiB for i in range(3)]

    def objects() -> list[tuple[str, str, bytes, bytes]]:
        return [
            (f"/{SC}", f"/{pnfsid(i)}", d, encode_objinfo(len(d), f"{zlib.adler32(d):08x}"))
            for i, d in enumerate(data)
        ]

    client.store(objects())  # the originals, on the first volume
    client.store([(f"/{SC}", f"/{pnfsid(9)}", b"x" * 8 * KiB, b"")])  # fills it
    client.store(objects()[:2])  # re-writes of two files, on the next volume
    async with sp_library(sp_build, srv) as library:
        found = await library.locate([pnfsid(i) for i in range(3)])
        placements = await library.placements()
    assert [len(found[pnfsid(i)]) for i in range(3)] == [2, 2, 1]
    wanted = [found[pnfsid(i)] for i in range(3)]
    chosen = cover_copies(wanted, set())
    assert {copy.volume for copy in chosen if copy} == {wanted[2][0].volume}
    report = duplicates_report(placements, 10)
    assert (report["duplicated_files"], report["mounts"]["minimum"]) == (2, 1)


async def test_every_api_call_runs_off_the_event_loop(
    sp_build: Path, tmp_path: Path, pool: Path
) -> None:
    """A slow mount (0.3 s in the stand-in) does not hold the event loop: a ticker keeps
    running while the retrieve waits, and the calls run on the session's own thread."""
    srv = server(tmp_path)
    async with sp_library(sp_build, srv) as library:
        copies = await archive(library, pool, [KiB])
    make_server(srv, ServerSettings(mount_s=0.3))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async with sp_library(sp_build, srv) as library:
        task = asyncio.create_task(ticker())
        results = await read(library, "sp0", copies, tmp_path / "out")
        task.cancel()
        names = {t.name for t in threading.enumerate()}
    assert [r.error for r in results] == [None]
    assert ticks >= 5
    assert any(name.startswith("sp-sp0") for name in names)


async def test_a_wrong_api_library_is_a_configuration_error(tmp_path: Path) -> None:
    library = SpLibrary(SpSettings(api_library=str(tmp_path / "libApiTSM64.so")))
    with pytest.raises(ConfigError, match=r"sp\.api_library"):
        await library.open()
    await library.close()

"""The SP backend's acceptance campaign on the stand-in client API library.

Usage: python benchmarks/sp_campaign.py [--workdir DIR] [--files 2000] [--volumes 20]
                                        [--drives 4] [--stream-mib 512]

1. Recall campaign: FILES objects archived on the stand-in server (VOLUMES volumes filled
   in sequence, lto9 timings scaled by 0.001) by a raw API session, as an earlier client
   would have; then a real ``tssd serve`` (``backend.type = "sp"``, DRIVES session slots,
   the node's MAXNUMMP the same) gets one ``tss-hsm get`` per file in poll mode, in a
   shuffled order, while its queue is paused; the queue is resumed and every call
   repeated until it answers 0. Every recalled file is compared byte for byte. The
   stand-in's own logs give the figures: mounts per volume (``mounts.log``) and backward
   locates inside a session (``positions.log``).
2. Data path: one retrieve stream of STREAM_MIB through the backend with its checksum
   into a pool file, against a plain copy of the same bytes with adler32 and fsync on
   the same machine; the ratio of the two rates.
3. Loop lag: four retrieve streams at once; a ticker on the event loop records the
   longest delay past its 10 ms period.

Prints one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.sp_fixtures import ApiClient  # noqa: E402
from tssd.backends.base import ReadItem, WriteItem  # noqa: E402
from tssd.backends.sp.library import SpLibrary  # noqa: E402
from tssd.backends.sp.naming import encode_objinfo  # noqa: E402
from tssd.backends.sp.standin import (  # noqa: E402
    ServerSettings,
    build,
    make_server,
)
from tssd.config import SpSettings  # noqa: E402
from tssd.files import FileSink, FileSource, adler32_hex  # noqa: E402
from tssd.logs import configure_logging  # noqa: E402
from tssd.testing import BIN, serve_env, spawn_serve, stop_serve, wait_ready  # noqa: E402

SC = "atlas:tape"
MiB = 1024 * 1024


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def si(size: int, adler: str) -> str:
    return (
        f"size={size};new=false;stored=true;sClass={SC};cClass=-;hsm=osm;"
        f"accessLatency=NEARLINE;retentionPolicy=CUSTODIAL;flag-c=1:{adler};"
        f"store=atlas;group=tape;path=/pnfs/sp/{size};"
    )


# -- 1. the recall campaign ----------------------------------------------------------------


def populate(lib: Path, server: Path, files: int, size: int) -> None:
    """Archive *files* objects of *size* bytes, 100 per transaction."""
    os.environ["DSMI_CONFIG"] = str(server / "dsm.opt")
    client = ApiClient(lib)
    client.sign_on()
    for start in range(0, files, 100):
        batch = []
        for i in range(start, min(files, start + 100)):
            data = random.Random(i).randbytes(size)
            adler = adler32_hex(zlib.adler32(data))
            batch.append((f"/{SC}", f"/{pnfsid(i)}", data, encode_objinfo(size, adler)))
        client.store(batch)
    client.close()


def campaign(work: Path, lib: Path, files: int, volumes: int, drives: int) -> dict[str, Any]:
    size = 64 * 1024
    server = work / "server"
    settings = ServerSettings.from_profile(
        "lto9", 0.001, capacity_bytes=size * (files // volumes), max_mount_points=drives
    )
    make_server(server, settings)
    populate(lib, server, files, size)
    home = work / "home"
    pool = work / "pool"
    pool.mkdir(parents=True)
    env = serve_env(
        home,
        f"sqlite+aiosqlite:///{home / 'tssd.db'}",
        {
            "TSSD_BACKEND_TYPE": "sp",
            "TSSD_SP_API_LIBRARY": str(lib),
            "TSSD_SP_OPTIONS_FILE": str(server / "dsm.opt"),
            "TSSD_SP_NODE": "TSSD",
            "TSSD_SP_MAX_MOUNT_POINTS": str(drives),
            "TSSD_SCHEDULER_TICK_S": "0.2",
            "TSSD_LOG_LEVEL": "info",
        },
    )
    env["TSSD_API_POOL_ROOTS"] = str(work)
    home.mkdir(parents=True)
    proc = spawn_serve(env, home / "tssd.log")
    try:
        wait_ready(proc, home / "tssd.sock", 60.0, (home / "tssd.log").read_text)
        return _recall_all(env, home, pool, server, files, size)
    finally:
        stop_serve(proc, signal.SIGTERM)


def _hsm(env: dict[str, str], *args: str) -> int:
    done = subprocess.run(
        [str(BIN / "tss-hsm-fast"), *args], env=env, capture_output=True, text=True, check=False
    )
    return done.returncode


def _recall_all(
    env: dict[str, str], home: Path, pool: Path, server: Path, files: int, size: int
) -> dict[str, Any]:
    socket = f"-tssd={home / 'tssd.sock'}"
    tssctl = [str(BIN / "tssctl")]
    subprocess.run([*tssctl, "queues", "set", "atlas", "--pause"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    # The objects' bfids: the catalog the pools would have recorded at put time.
    os.environ["DSMI_CONFIG"] = str(server / "dsm.opt")
    client = ApiClient(Path(env["TSSD_SP_API_LIBRARY"]))
    client.sign_on()
    bfids = {int(a.ll.lstrip("/"), 16): a.object_id for a in client.query(f"/{SC}", "/*")}
    client.close()
    order = list(range(files))
    random.Random(1).shuffle(order)

    def call(i: int) -> int:
        data = random.Random(i).randbytes(size)
        adler = adler32_hex(zlib.adler32(data))
        uri = f"osm://osm/?store=atlas&group=tape&bfid=sp.{bfids[i]}"
        return _hsm(env, "get", pnfsid(i), str(pool / pnfsid(i)), f"-si={si(size, adler)}",
                    f"-uri={uri}", socket, "-queue=atlas", "-mode=poll")  # fmt: skip

    started = time.monotonic()
    with ThreadPoolExecutor(16) as workers:
        first = list(workers.map(call, order))
    assert set(first) <= {0, 72}, Counter(first)
    subprocess.run([*tssctl, "queues", "set", "atlas", "--resume"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    pending = [i for i, rc in zip(order, first, strict=True) if rc != 0]
    while pending:
        time.sleep(0.5)
        with ThreadPoolExecutor(16) as workers:
            codes = list(workers.map(call, pending))
        assert set(codes) <= {0, 72}, Counter(codes)
        pending = [i for i, rc in zip(pending, codes, strict=True) if rc != 0]
    seconds = time.monotonic() - started
    wrong = [i for i in range(files)
             if (pool / pnfsid(i)).read_bytes() != random.Random(i).randbytes(size)]  # fmt: skip
    return {"files": files, "seconds": round(seconds, 1), "bytes_wrong": len(wrong),
            **_logs(server)}  # fmt: skip


def _logs(server: Path) -> dict[str, Any]:
    mounts = Counter(line.split()[2] for line in (server / "mounts.log").read_text().splitlines())
    sessions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in (server / "positions.log").read_text().splitlines():
        _, session, volume, position, _ = line.split()
        sessions[(session, volume)].append(int(position))
    backward = sum(
        1 for positions in sessions.values() for a, b in itertools.pairwise(positions) if b < a
    )
    return {
        "volumes_read": len(mounts),
        "mounts": sum(mounts.values()),
        "volumes_mounted_more_than_once": sum(1 for n in mounts.values() if n > 1),
        "objects_read": sum(len(p) for p in sessions.values()),
        "backward_locates_in_a_session": backward,
    }


# -- 2. and 3. the data path and the loop's lag --------------------------------------------


def plain_copy(source: Path, target: Path) -> float:
    """Bytes per second of read, adler32, write and fsync: what any copy tool costs."""
    started = time.monotonic()
    value = 1
    with source.open("rb") as src, target.open("wb") as dst:
        while data := src.read(MiB):
            value = zlib.adler32(data, value)
            dst.write(data)
        dst.flush()
        os.fsync(dst.fileno())
    return source.stat().st_size / (time.monotonic() - started)


async def data_path(work: Path, lib: Path, stream_mib: int) -> dict[str, Any]:
    server = work / "stream-server"
    # One stream's object fills a volume: the four streams read four volumes at once.
    make_server(server, ServerSettings(capacity_bytes=stream_mib * MiB, max_mount_points=4))
    settings = SpSettings(
        api_library=str(lib), options_file=str(server / "dsm.opt"), node="TSSD",
        max_mount_points=4,
    )  # fmt: skip
    out = work / "stream-pool"
    out.mkdir()
    sources = []
    for n in range(4):
        path = out / f"source{n}"
        with path.open("wb") as fh:
            for _ in range(stream_mib):
                fh.write(os.urandom(MiB))
        sources.append(path)
    async with SpLibrary(settings) as library:
        copies = []
        for n, path in enumerate(sources):
            size = path.stat().st_size
            value = 1
            with path.open("rb") as fh:
                while data := fh.read(MiB):
                    value = zlib.adler32(data, value)
            item = WriteItem(pnfsid(90_000 + n), SC, FileSource(path, size), adler32_hex(value))
            await library.mount(f"sp{n}", await library.writable_volume(SC, size))
            [result] = [r async for r in library.write(f"sp{n}", [item])]
            assert result.copy is not None, result.error
            copies.append(result.copy)
            await library.dismount(f"sp{n}")

        async def stream(n: int, name: str) -> float:
            copy = copies[n]
            await library.mount(f"sp{n}", copy.volume)
            started = time.monotonic()
            sink = FileSink(out / name)
            [result] = [r async for r in library.read(f"sp{n}", [ReadItem(copy, sink)])]
            assert result.error is None, result.error
            rate = copy.size / (time.monotonic() - started)
            await library.dismount(f"sp{n}")
            return rate

        # Warm both paths' page cache alike: each source read once before it is measured.
        plain_copy(sources[0], out / "warm")
        api = await stream(0, "api0")
        plain = await asyncio.to_thread(plain_copy, sources[0], out / "plain0")
        api_again = await stream(0, "api1")
        plain_again = await asyncio.to_thread(plain_copy, sources[0], out / "plain1")
        lag = await _loop_lag(lambda: asyncio.gather(*(stream(n, f"par{n}") for n in range(4))))
    api_rate, plain_rate = (api + api_again) / 2, (plain + plain_again) / 2
    return {
        "stream_mib": stream_mib,
        "api_mib_s": round(api_rate / MiB, 1),
        "plain_copy_mib_s": round(plain_rate / MiB, 1),
        "ratio": round(api_rate / plain_rate, 3),
        "four_streams_max_loop_lag_ms": lag,
    }


async def _loop_lag(work: Any) -> float:
    worst = 0.0
    running = True

    async def ticker() -> None:
        nonlocal worst
        while running:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            worst = max(worst, time.monotonic() - before - 0.01)

    task = asyncio.create_task(ticker())
    await work()
    running = False
    await task
    return round(worst * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tssd-sp-campaign"))
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--volumes", type=int, default=20)
    parser.add_argument("--drives", type=int, default=4)
    parser.add_argument("--stream-mib", type=int, default=512)
    parser.add_argument("--skip-campaign", action="store_true")
    args = parser.parse_args()
    # stdout carries the JSON figures only; the backend's warnings go to stderr.
    configure_logging("warning", "console")
    args.workdir.mkdir(parents=True, exist_ok=False)
    lib = build(args.workdir / "build")
    figures: dict[str, Any] = {"cpus": os.cpu_count()}
    if not args.skip_campaign:
        figures["campaign"] = campaign(
            args.workdir / "campaign", lib, args.files, args.volumes, args.drives
        )
    figures["data_path"] = asyncio.run(data_path(args.workdir, lib, args.stream_mib))
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()

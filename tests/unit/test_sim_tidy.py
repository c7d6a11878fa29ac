"""The simulated library tidies its store at start (issue 17 point 10): object files the
catalog never recorded (a crash between commit and record) are removed and counted, and
only by the daemon that holds the data directory's lock."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from structlog.testing import capture_logs
from test_sim_library import make_library, write


def plant(objects: Path, size: int) -> Path:
    path = objects / uuid.uuid4().hex
    path.write_bytes(b"o" * size)
    return path


async def test_orphans_are_removed_and_counted(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path) as lib:
        copy = (await write(lib, tmp_path, "P1", b"recorded")).copy
        assert copy is not None
    objects = tmp_path / "sim" / "objects"
    orphans = [plant(objects, 1000), plant(objects, 234)]
    partial = objects / f".{uuid.uuid4().hex}.tssd-part"
    partial.write_bytes(b"half")
    with capture_logs() as logs:
        async with make_library(sessions, tmp_path) as lib:
            assert not any(p.exists() for p in [*orphans, partial])
            assert (objects / copy.bfid).exists()
            assert (await lib.locate(["P1"]))["P1"] == [copy]
    (event,) = [e for e in logs if e["event"] == "sim.objects.orphans"]
    assert (event["removed"], event["bytes"], event["partial"], event["kept"]) == (2, 1234, 1, 1)


async def test_a_clean_store_logs_nothing(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path) as lib:
        await write(lib, tmp_path, "P1", b"recorded")
    with capture_logs() as logs:
        async with make_library(sessions, tmp_path):
            pass
    assert not [e for e in logs if e["event"].startswith("sim.objects")]


async def test_a_store_in_use_by_another_daemon_is_left_alone(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    async with make_library(sessions, tmp_path):
        # Another live daemon's file, committed but not yet recorded: no orphan.
        in_flight = plant(tmp_path / "sim" / "objects", 10)
        with capture_logs() as logs:
            async with make_library(sessions, tmp_path):
                assert in_flight.exists()
        assert [e["event"] for e in logs if e["event"].startswith("sim.objects")] == [
            "sim.objects.shared"
        ]
    # The owner is gone: the next start tidies.
    async with make_library(sessions, tmp_path):
        assert not in_flight.exists()

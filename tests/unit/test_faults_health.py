"""The health hooks in the drive manager: a drive that fails every mount is taken out of
service; a tape that fails to mount in three different drives is marked suspect."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.backends.base import DriveInfo, TapeBackend
from tssd.clock import RealClock
from tssd.db.health import SqlHealth
from tssd.db.models import Drive, Mount, Tape
from tssd.db.mounts import MountStore
from tssd.errors import PermanentBackendError, TransientBackendError
from tssd.health import Health
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.drives import DriveManager


class FlakyLibrary:
    """Drive d0 fails every mount; tape BAD fails to mount anywhere; the rest works."""

    def __init__(self) -> None:
        self.loaded: dict[str, str | None] = {f"d{i}": None for i in range(4)}

    async def drives(self) -> list[DriveInfo]:
        return [DriveInfo(name, volume) for name, volume in self.loaded.items()]

    async def mount(self, drive: str, volume: str) -> None:
        if drive == "d0":
            raise TransientBackendError("simulated IBM SP error 12: mount not possible")
        if volume == "BAD":
            raise PermanentBackendError("simulated media error on load")
        self.loaded[drive] = volume

    async def dismount(self, drive: str) -> None:
        self.loaded[drive] = None


@pytest.fixture
async def manager(sessions: async_sessionmaker[Any]) -> DriveManager:
    metrics = Metrics()
    retrier = Retrier(RetryPolicy(attempts=2, base_s=0.0, max_s=0.0), metrics, RealClock())
    backend = cast(TapeBackend, FlakyLibrary())
    health = Health(SqlHealth(sessions), metrics, drive_max_failures=3, tape_suspect_drives=3)
    drives = DriveManager(
        backend, MountStore(sessions), retrier, metrics, RealClock(), health=health
    )
    await drives.load()
    return drives


async def test_a_drive_that_never_mounts_goes_out_of_service(
    manager: DriveManager, sessions: async_sessionmaker[Any]
) -> None:
    d0 = manager.drives["d0"]
    for volume in ("A1", "A2", "A3"):
        with pytest.raises(TransientBackendError):
            await manager.ensure_mounted(d0, volume, "recall")
    assert not d0.enabled and d0 not in manager.free()
    async with sessions() as s:
        row = await s.get(Drive, "d0")
        assert row is not None and row.enabled is False
    samples = manager.metrics.registry.get_sample_value
    assert samples("tssd_drives", {"state": "disabled"}) == 1
    assert samples("tssd_backend_retries_total") == 3  # each mount was retried once
    # A good drive is untouched.
    await manager.ensure_mounted(manager.drives["d1"], "A1", "recall")
    assert manager.drives["d1"].enabled


async def test_a_tape_failing_in_three_drives_is_suspect(
    manager: DriveManager, sessions: async_sessionmaker[Any]
) -> None:
    for name in ("d1", "d2", "d3"):
        with pytest.raises(PermanentBackendError):
            await manager.ensure_mounted(manager.drives[name], "BAD", "recall")
    async with sessions() as s:
        states = dict((await s.execute(select(Tape.volume, Tape.state))).all())
    assert states == {"BAD": "suspect"}
    assert all(manager.drives[n].enabled for n in ("d1", "d2", "d3"))  # one failure each


async def test_a_failed_mount_leaves_no_open_mount_and_no_claim(
    manager: DriveManager, sessions: async_sessionmaker[Any]
) -> None:
    with pytest.raises(PermanentBackendError):
        await manager.ensure_mounted(manager.drives["d1"], "BAD", "recall")
    async with sessions() as s:
        mount = (await s.scalars(select(Mount))).one()
        drive = await s.get(Drive, "d1")
    assert mount.volume == "BAD" and mount.ready_at is None and mount.dismounted_at is not None
    assert drive is not None and drive.volume is None
    # The tape may go to another drive at once.
    with pytest.raises(PermanentBackendError):
        await manager.ensure_mounted(manager.drives["d2"], "BAD", "recall")


async def test_enabling_a_drive_again_forgets_its_failures(manager: DriveManager) -> None:
    d0 = manager.drives["d0"]
    for volume in ("A1", "A2"):
        with pytest.raises(TransientBackendError):
            await manager.ensure_mounted(d0, volume, "recall")
    assert manager.health is not None
    manager.health.reset_drive("d0")
    with pytest.raises(TransientBackendError):
        await manager.ensure_mounted(d0, "A3", "recall")
    assert d0.enabled  # one failure after the reset, not the third in a row

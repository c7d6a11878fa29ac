"""Drive bookkeeping: what each drive holds, mount history and mount metrics.

The database row of a drive carries the volume it holds; ``drives.volume`` is unique, so
a cartridge is recorded in at most one drive even if the in-memory view were wrong.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

import structlog

from tssd.activity import Activity
from tssd.backends.base import TapeBackend
from tssd.clock import Clock, utcnow
from tssd.cluster.claims import LocalClaims, VolumeClaims
from tssd.db.interface import MountBook
from tssd.domain import Kind
from tssd.errors import BackendError, TssdError
from tssd.health import Health, record_failure, record_success
from tssd.metrics import Metrics
from tssd.retry import Retrier
from tssd.scheduler.queues import MountLedger
from tssd.scheduler.reservations import Reservations

log = structlog.get_logger()


@dataclass
class DriveState:
    name: str
    enabled: bool = True
    volume: str | None = None
    busy: bool = False
    mount_id: int | None = None
    mounted_at: float = 0.0
    idle_since: float = 0.0
    files: int = 0
    bytes: int = 0
    transfer_s: float = 0.0
    last_error: str | None = None
    purposes: set[Kind] = field(default_factory=set)
    record: MountRecord | None = None
    #: Byte offset of the head after the last read (0 after a load), for RAO.
    head_offset: int = 0
    #: Sessions (passes) run since the process started, numbering MountRecord.reads.
    passes: int = 0
    #: The drive asked for cleaning (TapeAlert 20 "clean now"): rule drive_cleaning_due.
    cleaning_due: bool = False

    @property
    def state(self) -> str:
        if not self.enabled:
            return "disabled"
        if self.busy:
            return "busy"
        return "mounted" if self.volume else "empty"


@dataclass
class MountRecord:
    """One mount as the clock saw it (``tssd simulate`` reports from these)."""

    drive: str
    volume: str
    requested: float
    ready: float = 0.0
    unload: float | None = None
    ended: float | None = None
    files: int = 0
    bytes: int = 0
    transfer_s: float = 0.0
    locate_s: float = 0.0
    #: (pass number, position) of every read, in order (property tests check them).
    reads: list[tuple[int, int]] = field(default_factory=list)


class DriveManager:
    """Mounts and dismounts through the backend, recording each mount.

    The one owner of every :class:`DriveState`: the scheduler, the sessions and the API
    read them and change them only through the methods here (occupy, vacate, failed...).
    """

    def __init__(
        self,
        backend: TapeBackend,
        mounts: MountBook,
        retrier: Retrier,
        metrics: Metrics,
        clock: Clock,
        *,
        claims: VolumeClaims | None = None,
        health: Health | None = None,
    ) -> None:
        self.backend = backend
        #: The drive, mount and tape rows (tssd.db.mounts; tssd.db.memory_mounts in tests).
        self.mounts = mounts
        self.retrier = retrier
        self.metrics = metrics
        self.clock = clock
        self.drives: dict[str, DriveState] = {}
        #: Drive and tape failure bookkeeping (tssd/health.py); None in simulations.
        self.health = health
        #: Cartridge claims among instances sharing the database (tssd.cluster).
        self.claims: VolumeClaims = claims if claims is not None else LocalClaims()
        self._recent: deque[tuple[float, int]] = deque()
        #: Every mount of this process, for reports; the database keeps the durable history.
        self.history: list[MountRecord] = []
        #: Mount times per volume over the last day (the mount budget).
        self.ledger = MountLedger()
        #: Recent rates, latencies and queue depth for `tssctl top` and /status.
        self.activity = Activity()
        #: Drives whose idle tape would not unload: retried after keep_mounted_s.
        self._unload_failed: set[str] = set()

    async def load(self) -> None:
        """Take the drive list from the backend; close mounts a crash left open."""
        infos = await self.retrier.call("drives", self.backend.drives)
        enabled = await self.mounts.reset_drives(infos, self.claims.scope)
        for info in infos:
            state = DriveState(
                info.name,
                enabled=enabled.get(info.name, True),
                volume=info.volume,
                idle_since=self.clock.now(),
            )
            self.drives[info.name] = state
        self.update_gauge()

    # -- the state of a drive, changed here only ------------------------------------------

    def occupy(self, drive: DriveState) -> None:
        """*drive* is taken by a session or a dismount: no other work is given to it."""
        drive.busy = True

    def vacate(self, drive: DriveState, *, idle_since: float | None = None) -> None:
        """*drive* is free again (idle since *idle_since*, when given)."""
        drive.busy = False
        if idle_since is not None:
            drive.idle_since = idle_since

    def idle_from(self, drive: DriveState, at: float) -> None:
        drive.idle_since = at

    def session_failed(self, drive: DriveState, error: str) -> None:
        drive.last_error = error

    def begin_pass(self, drive: DriveState) -> None:
        """A recall pass starts on *drive* (numbering :attr:`MountRecord.reads`)."""
        drive.passes += 1

    def head_moved(self, drive: DriveState, offset: int, position: int) -> None:
        """*drive* read the file at *position*, which ends at byte *offset* (for RAO)."""
        drive.head_offset = offset
        if drive.record is not None:
            drive.record.reads.append((drive.passes, position))

    def set_enabled(self, name: str, enabled: bool) -> None:
        """An operator enabled or disabled drive *name* (already written to the table)."""
        state = self.drives.get(name)
        if state is None:
            return
        state.enabled = enabled
        self.update_gauge()
        if enabled and self.health is not None:
            self.health.reset_drive(name)

    async def failed(
        self, drive: DriveState, volume: str | None, error: BaseException, op: str
    ) -> None:
        """An *op* of *drive* (on *volume*) failed: count it against the hardware."""
        if await record_failure(self.health, drive, volume, error, op):
            drive.enabled = False
            self.update_gauge()

    def succeeded(self, drive: DriveState, volume: str | None) -> None:
        record_success(self.health, drive, volume)

    # -- queries ---------------------------------------------------------------------------

    def holding(self, volume: str) -> DriveState | None:
        return next((d for d in self.drives.values() if d.volume == volume), None)

    def free(self) -> list[DriveState]:
        return [d for d in self.drives.values() if d.enabled and not d.busy]

    def update_gauge(self) -> None:
        counts: dict[str, int] = {"empty": 0, "mounted": 0, "busy": 0, "disabled": 0}
        for d in self.drives.values():
            counts[d.state] += 1
        for state, n in counts.items():
            self.metrics.drives.labels(state=state).set(n)

    async def ensure_mounted(self, drive: DriveState, volume: str, purpose: Kind) -> None:
        """Make *volume* the tape in *drive*, dismounting what it holds."""
        if drive.volume == volume:
            drive.purposes.add(purpose)
            return
        if drive.volume is not None:
            await self.dismount(drive)
        await self.claims.claim(drive.name, volume)
        start = self.clock.now()
        self.ledger.record(volume, start)
        mount_id = await self.mounts.open_mount(drive.name, volume, purpose)
        log.info("mount.start", drive=drive.name, volume=volume, purpose=purpose)
        try:
            await self.retrier.call(
                "mount", lambda: self.backend.mount(drive.name, volume), drive=drive.name,
                volume=volume,
            )  # fmt: skip
        except BackendError as exc:
            await self.failed(drive, volume, exc, "mount")
            await self.mounts.mount_failed(drive.name, mount_id)
            raise
        ready = self.clock.now()
        self.history.append(MountRecord(drive.name, volume, requested=start, ready=ready))
        drive.record = self.history[-1]
        drive.volume, drive.mount_id, drive.mounted_at = volume, mount_id, start
        drive.files = drive.bytes = drive.head_offset = 0
        drive.transfer_s = 0.0
        drive.purposes = {purpose}
        await self.mounts.mounted(drive.name, volume, mount_id)
        self.metrics.mounts_total.inc()
        self.metrics.mount_seconds.observe(ready - start)
        log.info("mount.ready", drive=drive.name, volume=volume, mount_s=round(ready - start, 3))

    async def dismount(self, drive: DriveState) -> None:
        if drive.volume is None:
            return
        volume = drive.volume
        record = drive.record
        if record is not None:
            record.unload = self.clock.now()
        await self.retrier.call(
            "dismount", lambda: self.backend.dismount(drive.name), drive=drive.name, volume=volume
        )
        held = self.clock.now() - drive.mounted_at
        efficiency = min(1.0, drive.transfer_s / held) if held > 0 else 0.0
        self.metrics.mount_session_seconds.observe(held)
        self.metrics.mount_files.observe(drive.files)
        self.metrics.mount_bytes.observe(drive.bytes)
        self.metrics.mount_efficiency.observe(efficiency)
        await self.mounts.close_mount(
            drive.name, drive.mount_id, utcnow(),
            files=drive.files, nbytes=drive.bytes, transfer_s=drive.transfer_s,
        )  # fmt: skip
        log.info(
            "mount.end",
            drive=drive.name,
            volume=volume,
            files=drive.files,
            bytes=drive.bytes,
            session_s=round(held, 3),
            efficiency=round(efficiency, 4),
        )
        if record is not None:
            record.ended = self.clock.now()
        drive.volume = None
        drive.mount_id = None
        drive.record = None
        drive.idle_since = self.clock.now()

    def account(self, drive: DriveState, nbytes: int, transfer_s: float, locate_s: float) -> None:
        self._recent.append((self.clock.now(), nbytes))
        self.activity.moved(drive.name, nbytes, self.clock.now())
        if drive.record is not None:
            drive.record.files += 1
            drive.record.bytes += nbytes
            drive.record.transfer_s += transfer_s
            drive.record.locate_s += locate_s
        drive.files += 1
        drive.bytes += nbytes
        drive.transfer_s += transfer_s
        if locate_s > 0:
            self.metrics.locate_seconds.observe(locate_s)

    def throughput(self, window_s: float = 60.0) -> dict[str, float]:
        """Bytes moved in the last *window_s* seconds, and the rate in MB/s."""
        horizon = self.clock.now() - window_s
        while self._recent and self._recent[0][0] < horizon:
            self._recent.popleft()
        moved = sum(n for _, n in self._recent)
        return {"bytes_last_minute": moved, "mb_s": round(moved / window_s / 1e6, 3)}

    async def flush_stats(self, drive: DriveState) -> None:
        """Persist the running mount's counters at the end of each session: `tssctl
        mounts` shows a mounted tape's files as soon as a session on it ends. Throttled
        once, it showed them up to minutes late; the write is one core statement."""
        if drive.mount_id is None:
            return
        await self.mounts.save_stats(drive.mount_id, drive.files, drive.bytes, drive.transfer_s)

    async def unload_expired(self, keep_s: float, reservations: Reservations) -> None:
        """Unload tapes idle for *keep_s* seconds, and at once those in disabled drives: a
        tape left in a drive nobody may use would hold its queue for ever. Each tape is
        reserved in *reservations* while it is unloaded."""
        now = self.clock.now()
        for drive in self.drives.values():
            if drive.busy or drive.volume is None:
                continue
            may_wait = drive.enabled or drive.name in self._unload_failed
            if may_wait and now - drive.idle_since < keep_s:
                continue
            volume = drive.volume
            reservations.hold_volume(volume)
            self.occupy(drive)
            try:
                await self.dismount(drive)
                self._unload_failed.discard(drive.name)
            except TssdError as exc:
                # Retried after keep_s, not on every pass.
                self._unload_failed.add(drive.name)
                self.idle_from(drive, now)
                log.warning("dismount.failed", drive=drive.name, volume=volume, error=str(exc))
            finally:
                self.vacate(drive)
                reservations.release_volume(volume)

    async def unload_idle(self, bound_s: float) -> None:
        """Unload the tapes of idle drives (after sessions ended), all at once, for at
        most *bound_s* seconds in all.

        One after another, 8 drives' rewinds, unloads and robot moves kept a stopping
        daemon alive for minutes. A tape still in its drive when the bound passes stays
        there: at the next start the backend reports it in the drive, the mount book
        closes its open mount (``reset_drives``) and a session for it reads without a
        new mount; its requests were queued again when their session ended.
        """
        loaded = [d for d in self.drives.values() if d.volume and not d.busy]
        if loaded and bound_s > 0:
            tasks = [asyncio.create_task(self._unload_at_exit(d)) for d in loaded]
            _, late = await asyncio.wait(tasks, timeout=bound_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        left = {d.name: d.volume for d in loaded if d.volume is not None}
        if left:
            log.warning("scheduler.left_mounted", drives=left, bound_s=bound_s)

    async def _unload_at_exit(self, drive: DriveState) -> None:
        try:
            await self.dismount(drive)
        except TssdError as exc:
            log.warning("dismount.failed", drive=drive.name, error=str(exc))

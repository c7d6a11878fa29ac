"""Bookkeeping of faulty hardware: drives taken out of service, tapes marked suspect.

A drive whose operations fail ``health.drive_max_failures`` times in a row is disabled
(``drives.enabled = false``): the scheduler gives it no more work until an operator
enables it again. A tape that failed on ``health.tape_suspect_drives`` different drives,
with no success on it in between, is marked ``tapes.state = 'suspect'`` and reported:
the fault follows the cartridge, not a drive. Successes reset both counts, so the
scattered transient errors of a healthy library never add up to a verdict.

Errors that say nothing about the hardware (the file is gone, a checksum in the request
was wrong, the pool disk refused) are not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from tssd.errors import BackendError, ExpectedChecksumMismatch, ObjectNotFound
from tssd.metrics import Metrics
from tssd.ports.health import HealthBook

log = structlog.get_logger()


class DriveLike(Protocol):
    """A drive as health reads it; only its owner (scheduler.drives) changes it."""

    @property
    def name(self) -> str: ...

    @property
    def enabled(self) -> bool: ...


def counts_against_hardware(error: BaseException) -> bool:
    """Whether *error* says something about the drive or the tape it happened on."""
    return isinstance(error, BackendError) and not isinstance(
        error, (ObjectNotFound, ExpectedChecksumMismatch)
    )


class Health:
    """Counts failures per drive and per tape and acts on the thresholds; *book* records
    the verdicts."""

    def __init__(
        self,
        book: HealthBook,
        metrics: Metrics,
        *,
        drive_max_failures: int = 5,
        tape_suspect_drives: int = 3,
        on_drive_disabled: Callable[[], None] | None = None,
    ) -> None:
        self.book = book
        self.metrics = metrics
        self.drive_max_failures = drive_max_failures
        self.tape_suspect_drives = tape_suspect_drives
        self.on_drive_disabled = on_drive_disabled
        #: Failures in a row per drive.
        self.drive_failures: dict[str, int] = {}
        #: Drives each tape failed on since its last success.
        self.tape_failures: dict[str, set[str]] = {}
        #: Tapes marked suspect by this process.
        self.suspect: set[str] = set()

    async def failed(
        self, drive: DriveLike, volume: str | None, error: BaseException, *, op: str
    ) -> bool:
        """Record a failed *op* of *drive* (on *volume*); mark the tape suspect when due.
        True when the drive is to leave service (recorded here; its owner takes it out)."""
        if not counts_against_hardware(error):
            return False
        self.metrics.hardware_failures_total.labels(op=op).inc()
        n = self.drive_failures.get(drive.name, 0) + 1
        self.drive_failures[drive.name] = n
        disable = bool(self.drive_max_failures and n >= self.drive_max_failures and drive.enabled)
        if disable:
            await self._disable(drive, n, error)
        if volume is not None:
            await self._tape_failed(drive, volume, error)
        return disable

    async def _tape_failed(self, drive: DriveLike, volume: str, error: BaseException) -> None:
        drives = self.tape_failures.setdefault(volume, set())
        drives.add(drive.name)
        if (
            self.tape_suspect_drives
            and len(drives) >= self.tape_suspect_drives
            and volume not in self.suspect
        ):
            await self._suspect(volume, sorted(drives), error)

    def succeeded(self, drive: DriveLike, volume: str | None) -> None:
        """An operation of *drive* on *volume* worked: both are healthy again."""
        self.drive_failures.pop(drive.name, None)
        if volume is not None:
            self.tape_failures.pop(volume, None)

    def reset_drive(self, name: str) -> None:
        """An operator enabled *name* again: its count of failures in a row starts anew."""
        self.drive_failures.pop(name, None)

    async def _disable(self, drive: DriveLike, failures: int, error: BaseException) -> None:
        await self.book.disable_drive(drive.name)
        self.metrics.drives_disabled_total.inc()
        log.error("drive.disabled", drive=drive.name, failures=failures, error=str(error))
        if self.on_drive_disabled is not None:
            self.on_drive_disabled()

    async def _suspect(self, volume: str, drives: list[str], error: BaseException) -> None:
        self.suspect.add(volume)
        await self.book.mark_tape_suspect(volume)
        self.metrics.tapes_suspect_total.inc()
        log.error("tape.suspect", volume=volume, drives=drives, error=str(error))


async def record_failure(
    health: Health | None, drive: DriveLike, volume: str | None, error: BaseException, op: str
) -> bool:
    """:meth:`Health.failed` when health bookkeeping is wired (not in simulations)."""
    if health is not None:
        return await health.failed(drive, volume, error, op=op)
    return False


def record_success(health: Health | None, drive: DriveLike, volume: str | None) -> None:
    """:meth:`Health.succeeded` when health bookkeeping is wired."""
    if health is not None:
        health.succeeded(drive, volume)

"""The request store's contract, as the code outside ``tssd/db/`` uses it.

:class:`~tssd.db.store.RequestStore` (SQLite, PostgreSQL) and
:class:`~tssd.db.memory.MemoryStore` (dicts, for fast tests) both satisfy
:class:`RequestStoreInterface`; ``tests/integration/test_store_contract.py`` (and
``..._scheduling.py`` for the scheduler's part) runs one suite on SQLite, PostgreSQL and
memory. The rules every implementation keeps:

- At most one *open* (queued or active) request per ``(kind, key)``: submitting the same
  key again attaches to it, which makes every submission idempotent.
- Every state change is a named transition of :class:`~tssd.lifecycle.RequestLedger`
  and conditional: a request moves only out of the states :data:`tssd.lifecycle.LIFECYCLE`
  names for it, so a request finished, cancelled or claimed elsewhere is never
  overwritten.
- Every state change appends an event (the request's history); a finish wakes the
  waiters of :attr:`notifier`, new or requeued work wakes :attr:`work`.
- The transitions, ``requeue_active`` and ``set_locations`` are declared as returning an
  awaitable, not as ``async def``: the SQL store wraps them in ``db_retry``, which does.
- Requests are returned as :class:`tssd.domain.Request` records (frozen snapshots, made
  by :mod:`tssd.db.views`), never ORM rows: a change is a store call.

The scheduler's gateway (:attr:`~RequestStoreInterface.scheduling`, its reads and claims,
and :attr:`~RequestStoreInterface.queue_settings`) and the views of the store each part of
the scheduler is typed on are the domain's: :mod:`tssd.ports.scheduling`, re-exported
here. Left out, being SQL-specific: ``sessions``, ``engine``, ``postgres``, ``tally`` and
``statistics`` (the other ``db/`` stores are built from them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from tssd.db.mounts import DriveInfo
from tssd.db.notifier import Notifier
from tssd.db.pages import ListFilter
from tssd.db.polls import Obtained, PollIndex
from tssd.domain import Kind, Request
from tssd.lifecycle import RequestLedger
from tssd.ports.scheduling import (
    CandidateReads,
    CountRow,
    PendingRow,
    QueueSettings,
    SchedulingClaims,
    SchedulingGateway,
)
from tssd.submit import SubmitSpec
from tssd.work import WorkSignal

__all__ = [
    "CandidateReads",
    "CountRow",
    "MountBook",
    "PendingRow",
    "QueueSettings",
    "RequestStoreInterface",
    "SchedulingClaims",
    "SchedulingGateway",
]


@runtime_checkable
class RequestStoreInterface(RequestLedger, Protocol):
    """Every request's state, and every change of it (the named transitions of
    :class:`~tssd.lifecycle.RequestLedger`); see the module docstring."""

    #: Waiters on requests and listeners of finished ones.
    notifier: Notifier
    #: The scheduler's work signal: submits note their kinds, requeues ``requeued``.
    work: WorkSignal
    #: Open recalls and migrations for ``tss-hsm``'s polls, kept current by every change.
    polls: PollIndex
    #: This daemon's id when several share the database (``tssd.cluster``), else None.
    instance: str | None

    # -- intake -------------------------------------------------------------------------

    async def submit(self, specs: Sequence[SubmitSpec]) -> list[tuple[bool, Request]]:
        """Record *specs* at once: one ``(created, row)`` per spec, in the specs' order.

        A spec whose ``(kind, key)`` has an open request gets that request and
        ``created=False``; otherwise a new queued request (event ``None -> queued``,
        reason ``submitted``). Specs of one batch sharing a key share one new request,
        each reported as created. New work notes its kinds on ``work``
        (:meth:`~tssd.work.WorkSignal.submitted`). Safe against concurrent submitters of
        the same key.
        """
        ...

    async def obtain(self, spec: SubmitSpec, *, adopt_finished: bool) -> Obtained:
        """``tss-hsm``'s adopt-or-create of the newest request of the spec's kind and key.

        Adopts (``created=False``) an open request; with *adopt_finished* also a finished,
        unreported, not abandoned one of the same path; and a done migration of the same
        file whose tape copy was not removed since (:func:`tssd.db.polls.on_tape_already`).
        Otherwise creates a queued request as :meth:`submit` does. ``reported`` tells
        whether the adopted request's outcome was already reported.
        """
        ...

    # -- queries ------------------------------------------------------------------------

    async def get(self, request_id: int) -> Request:
        """The request *request_id*; raises :class:`~tssd.errors.NotFound`."""
        ...

    async def list_requests(self, flt: ListFilter) -> list[Request]:
        """Requests matching *flt*: equality on each
        field given, ids above ``after``, at most ``limit``, in id order."""
        ...

    async def query(self, ids: Sequence[int]) -> dict[str, Any]:
        """Progress of a batch: ``counts`` per state (every state, zeros included),
        ``bytes_total`` and ``bytes_done`` (of done ones), ``missing`` ids (in the order
        asked) and up to 100 ``failed`` rows (failed or cancelled)."""
        ...

    async def counts(self) -> list[CountRow]:
        """``(kind, queue, state, count)`` for every combination present, in no order."""
        ...

    async def queues(self) -> list[dict[str, Any]]:
        """The configured queues: ``name``, ``priority``, ``max_drives``, ``paused``,
        ``latency_target_s``."""
        ...

    async def wait(self, request_id: int, timeout: float) -> tuple[Request, bool]:
        """The request once finished, or after *timeout* seconds: ``(row, finished)``.

        Woken by :meth:`Notifier.finished`, never by polling. Raises
        :class:`~tssd.errors.NotFound` for an unknown id.
        """
        ...

    async def latest(self, kind: str, pnfsid: str) -> tuple[Request, bool] | None:
        """The newest request of *kind* for *pnfsid* (any state) and whether its outcome
        was reported, or None."""
        ...

    async def mark_reported(self, request_id: int) -> Request:
        """Record that a client was told the outcome (event ``state -> state``, reason
        ``reported``); a ``claim`` delivery becomes ``claimed``. Idempotent. Raises
        :class:`~tssd.errors.NotFound`, or :class:`~tssd.errors.Conflict` for an open
        request."""
        ...

    # -- operator actions ---------------------------------------------------------------

    async def cancel_request(
        self, request_id: int, reason: str = "cancelled by operator"
    ) -> Request:
        """The ledger's ``cancel`` of one open request, for an operator: the cancelled
        row. Raises :class:`~tssd.errors.Conflict` when it is finished already (it is
        left as it is) and :class:`~tssd.errors.NotFound` for an unknown id."""
        ...

    async def retry_request(self, request_id: int) -> Request:
        """The ledger's ``retry`` of one failed or cancelled request, for an operator:
        the queued row. Raises :class:`~tssd.errors.Conflict` for any other state, or when
        another open request of its kind and key exists; NotFound for an unknown id."""
        ...

    async def count_open(self) -> int:
        """The number of open (queued or active) requests, counted now (admission's
        figure, :class:`tssd.ports.admission.OpenCount`)."""
        ...

    # -- scheduler side -----------------------------------------------------------------

    @property
    def scheduling(self) -> SchedulingGateway:
        """The scheduler's reads of the queue and its claims (:mod:`tssd.ports.scheduling`)."""
        ...

    @property
    def queue_settings(self) -> QueueSettings:
        """The configured queues as the scheduler reads them."""
        ...

    def requeue_active(self, reason: str) -> Awaitable[int]:
        """At start-up: active requests go back to the queue (drive and start cleared);
        with :attr:`instance` set only this instance's or unowned ones. How many moved."""
        ...

    def set_locations(self, located: dict[int, tuple[str, int]]) -> Awaitable[None]:
        """Record ``request id -> (volume, position)``, whatever the state; no event."""
        ...


class MountBook(Protocol):
    """The drive, mount and tape rows the scheduler's :class:`DriveManager` writes
    (:class:`tssd.db.mounts.MountStore`; :class:`tssd.db.memory_mounts.MemoryMounts`)."""

    async def reset_drives(self, infos: Sequence[DriveInfo], scope: Any) -> dict[str, bool]:
        """At start-up: close the mounts a crash left open, record what each drive holds
        now; return whether each drive known before is enabled."""

    async def open_mount(self, drive: str, volume: str, purpose: Kind) -> int:
        """Record a mount requested now; return its id."""

    async def mounted(self, drive: str, volume: str, mount_id: int) -> None:
        """The tape is ready in the drive: the mount, the drive and the tape's count."""

    async def mount_failed(self, drive: str, mount_id: int) -> None:
        """The tape never became ready: close its mount and empty the drive."""

    async def save_stats(self, mount_id: int, files: int, nbytes: int, transfer_s: float) -> None:
        """The running mount's counters."""

    async def close_mount(
        self,
        drive: str,
        mount_id: int | None,
        at: datetime,
        *,
        files: int,
        nbytes: int,
        transfer_s: float,
    ) -> None:
        """The tape left *drive* at *at*: close its mount (final counters), empty the drive."""

    async def requested_since(self, since: datetime) -> list[tuple[str, datetime]]:
        """(volume, requested_at) of the mounts requested since *since*, oldest first."""

"""tssd's own domain types: request kinds and states, and the records of a request, a
drive and a mount.

Nothing here imports the ORM or SQLAlchemy. Every layer above ``tssd/db/`` sees a request
as a :class:`Request` record (the API, ``tssctl why``, the scheduler, ENDIT, delivery,
``simulate``): ``tssd/db/`` translates its rows into them (``tssd.db.views``) before
they leave it, so a change of schema stays inside ``db/``, and a record is never written
back (frozen: a change of state is a store call).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class Kind(enum.StrEnum):
    """What a request asks of tape."""

    RECALL = "recall"
    MIGRATE = "migrate"
    REMOVE = "remove"


class State(enum.StrEnum):
    """Where a request is in its lifecycle (docs/architecture.md, "Request lifecycle")."""

    QUEUED = "queued"
    ACTIVE = "active"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: A recall whose part file no pool call claimed in time (delivery.claim_timeout_s).
    ABANDONED = "abandoned"

    @property
    def is_open(self) -> bool:
        return self in (State.QUEUED, State.ACTIVE)


OPEN_STATES = ("queued", "active")
TERMINAL_STATES = ("done", "failed", "cancelled", "abandoned")


@dataclass(frozen=True, slots=True)
class Request:
    """A request as the layers above the database see it: a snapshot, never written back.

    Its attributes are those of the ``requests`` row (``tssd.db.models.Request``), with
    ``kind`` and ``state`` as their enums.
    """

    id: int
    kind: Kind
    state: State
    key: str
    pnfsid: str | None
    path: str | None
    size: int | None
    storage_class: str | None
    checksum: str | None
    hsm_type: str
    hsm_instance: str
    store: str | None
    group: str | None
    bfid: str | None
    uri: str | None
    queue: str
    priority: int
    volume: str | None
    position: int | None
    drive: str | None
    attempts: int
    result_adler32: str | None
    error_code: int | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    instance: str | None
    delivery: str | None
    owner_uid: int | None


@dataclass(frozen=True, slots=True)
class Drive:
    """A tape drive as recorded in the database (the ``drives`` row): what another
    instance's drive shows in ``GET /v1/top``."""

    name: str
    enabled: bool
    state: str  # empty, mounted, busy
    volume: str | None
    updated_at: datetime
    instance: str | None


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount of a cartridge in a drive, with what it served (the ``mounts`` row)."""

    id: int
    drive: str
    volume: str
    purpose: str  # recall or migrate
    requested_at: datetime
    ready_at: datetime | None
    dismounted_at: datetime | None
    files: int
    bytes: int
    transfer_s: float


@dataclass(frozen=True, slots=True)
class Instance:
    """A tssd daemon sharing the database, and its heartbeat (the ``instances`` row)."""

    id: str
    host: str
    pid: int
    state: str  # live, stopped, reaped
    started_at: datetime
    heartbeat_at: datetime

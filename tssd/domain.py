"""tssd's own domain types: request kinds and states, and a frozen view of a request.

Nothing here imports the ORM or SQLAlchemy: the API, ``tssctl why``, the CLI and the
scheduler's rules read these, and ``tssd/db/`` translates its rows into them
(``tssd.db.views.request_view``), so a change of schema stays inside ``db/``.
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
class RequestView:
    """A request as the layers above the database see it: a snapshot, never written back."""

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

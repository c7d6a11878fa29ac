"""ORM models. The Alembic migrations in ``migrations/`` must produce exactly this schema.

Times are stored as UTC and read back timezone-aware (:class:`UtcDateTime`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tssd.clock import utcnow
from tssd.domain import OPEN_STATES, TERMINAL_STATES, Kind, State

# Re-exported for older imports; new code imports them from tssd.domain.
__all__ = ["OPEN_STATES", "TERMINAL_STATES", "Kind", "State", "utcnow"]

# Deterministic constraint names keep Alembic migrations identical on SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL wants BIGINT for big queues.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A time column, timezone-aware UTC on every database: the one place time zones are
    handled. PostgreSQL's ``timestamptz`` keeps the instant; SQLite has no time zones and
    stores the wall time as written, so a time is written in UTC and read back as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None and value.utcoffset():
            return value.astimezone(UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


#: The predicate of ``uq_requests_open_key``, spelled exactly as the index spells it: a
#: partial index serves a query only when the planner can prove the query's condition
#: implies the index's, which neither PostgreSQL (in a generic plan) nor SQLite can with
#: bound parameters in place of the states.
OPEN_STATE_SQL = "requests.state IN ('queued', 'active')"
#: Queued recalls not yet located: the predicate of ``ix_requests_unlocated`` (same rule).
UNLOCATED_SQL = "requests.state = 'queued' AND requests.kind = 'recall' AND requests.volume IS NULL"


class Request(Base):
    """One recall, migration or removal asked for by dCache or an operator."""

    __tablename__ = "requests"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default=State.QUEUED.value)
    # Idempotency key: the pnfsid for recall/migrate, the bfid for remove.
    key: Mapped[str] = mapped_column(String(128))
    pnfsid: Mapped[str | None] = mapped_column(String(64))
    path: Mapped[str | None] = mapped_column(Text)
    size: Mapped[int | None] = mapped_column(BigInteger)
    storage_class: Mapped[str | None] = mapped_column(String(255))
    checksum: Mapped[str | None] = mapped_column(String(64))  # adler32 hex from flag-c
    hsm_type: Mapped[str] = mapped_column(String(64), default="osm")
    hsm_instance: Mapped[str] = mapped_column(String(64), default="osm")
    store: Mapped[str | None] = mapped_column(String(255))
    group: Mapped[str | None] = mapped_column("grp", String(255))
    bfid: Mapped[str | None] = mapped_column(String(128))
    uri: Mapped[str | None] = mapped_column(Text)
    queue: Mapped[str] = mapped_column(String(64), default="default")
    priority: Mapped[int] = mapped_column(Integer, default=0)
    # Where a recall reads from, filled in when the backend has been asked.
    volume: Mapped[str | None] = mapped_column(String(32))
    position: Mapped[int | None] = mapped_column(BigInteger)
    drive: Mapped[str | None] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result_adler32: Mapped[str | None] = mapped_column(String(16))
    error_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # The tssd instance that claimed it (several instances on one PostgreSQL).
    instance: Mapped[str | None] = mapped_column(String(128))
    # How a recall reaches its path: "claim" = left as a part file for the pool's next
    # tss-hsm call to rename into place ("claimed" once it was); NULL = renamed by tssd
    # (tssctl, ENDIT).
    delivery: Mapped[str | None] = mapped_column(String(8))

    # The uid of the pool (Unix socket peer) that submitted it: a pool cancels only its own.
    owner_uid: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        # At most one open request per (kind, key): what makes submit idempotent.
        Index(
            "uq_requests_open_key",
            "kind",
            "key",
            unique=True,
            sqlite_where=text("state IN ('queued', 'active')"),
            postgresql_where=text("state IN ('queued', 'active')"),
        ),
        # Serves the scheduler: unlocated recalls, per-tape queues in position order.
        Index("ix_requests_state_kind_volume", "state", "kind", "volume", "position"),
        Index("ix_requests_volume_position", "volume", "position"),
        # Located queued recalls in arrival order (fifo's candidates, one per pass): without
        # it the database sorts the whole queue by id on every pass.
        Index(
            "ix_requests_located_order",
            "state",
            "kind",
            "id",
            sqlite_where=text("volume IS NOT NULL"),
            postgresql_where=text("volume IS NOT NULL"),
        ),
        Index("ix_requests_pnfsid", "pnfsid"),
        # The reaper of unclaimed part files: delivery = 'claim' only until a call claims.
        Index("ix_requests_delivery_state", "delivery", "state", "finished_at"),
        # Id-ordered pages by state, state and kind, or queue (SQLite sorts every match
        # without the id column in the index), and retention by finish time (0004e).
        Index("ix_requests_state_id", "state", "id"),
        Index("ix_requests_state_kind_id", "state", "kind", "id"),
        Index("ix_requests_queue_id", "queue", "id"),
        Index("ix_requests_finished_at", "finished_at"),
        # The oldest recalls still to locate, without walking the located ones.
        Index(
            "ix_requests_unlocated",
            "id",
            sqlite_where=text("state = 'queued' AND kind = 'recall' AND volume IS NULL"),
            postgresql_where=text("state = 'queued' AND kind = 'recall' AND volume IS NULL"),
        ),
    )


class RequestEvent(Base):
    """Every state transition of a request, with its time: the request's history."""

    __tablename__ = "request_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("requests.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)


class QueueRow(Base):
    """A named request queue (per VO or storage class)."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    max_drives: Mapped[int | None] = mapped_column(Integer)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Seconds within which the queue's requests should be done; NULL: no target.
    latency_target_s: Mapped[float | None] = mapped_column(Float)


class Tape(Base):
    """tssd's view of a cartridge: its use and health, whatever the backend."""

    __tablename__ = "tapes"

    volume: Mapped[str] = mapped_column(String(32), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default="ok")  # ok, suspect, disabled
    mounts: Mapped[int] = mapped_column(Integer, default=0)
    last_mounted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class Drive(Base):
    """A tape drive and the cartridge it holds. A volume is in at most one drive."""

    __tablename__ = "drives"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    state: Mapped[str] = mapped_column(String(16), default="empty")  # empty, mounted, busy
    volume: Mapped[str | None] = mapped_column(String(32), unique=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # The tssd instance whose host the drive is attached to (tssd.cluster).
    instance: Mapped[str | None] = mapped_column(String(128))


class Instance(Base):
    """A tssd daemon sharing the database, and its heartbeat (tssd.cluster)."""

    __tablename__ = "instances"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="live")  # live, stopped, reaped
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Mount(Base):
    """One mount of a cartridge in a drive, with what it served."""

    __tablename__ = "mounts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    drive: Mapped[str] = mapped_column(String(64))
    volume: Mapped[str] = mapped_column(String(32), index=True)
    purpose: Mapped[str] = mapped_column(String(16))  # recall or migrate
    requested_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    ready_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    dismounted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    files: Mapped[int] = mapped_column(Integer, default=0)
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    transfer_s: Mapped[float] = mapped_column(Float, default=0.0)


class SimTape(Base):
    """Simulated library: a cartridge, its fill state and the storage class it serves."""

    __tablename__ = "sim_tapes"

    volume: Mapped[str] = mapped_column(String(32), primary_key=True)
    storage_class: Mapped[str | None] = mapped_column(String(255))
    capacity: Mapped[int] = mapped_column(BigInteger)
    used: Mapped[int] = mapped_column(BigInteger, default=0)
    next_seq: Mapped[int] = mapped_column(Integer, default=1)
    full: Mapped[bool] = mapped_column(Boolean, default=False)


class SimObject(Base):
    """Simulated library: one copy of an object on a cartridge (the IBM SP catalog)."""

    __tablename__ = "sim_objects"

    bfid: Mapped[str] = mapped_column(String(64), primary_key=True)
    pnfsid: Mapped[str] = mapped_column(String(64), index=True)
    volume: Mapped[str] = mapped_column(String(32))
    seq: Mapped[int] = mapped_column(Integer)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)  # bytes written before it
    size: Mapped[int] = mapped_column(BigInteger)
    adler32: Mapped[str | None] = mapped_column(String(16))
    storage_class: Mapped[str | None] = mapped_column(String(255))
    written_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    # Catalog imports have no bytes: recalls of them produce deterministic filler data.
    has_data: Mapped[bool] = mapped_column(Boolean, default=False)

    __table_args__ = (Index("uq_sim_objects_volume_seq", "volume", "seq", unique=True),)


class ScsiTape(Base):
    """SCSI library: a cartridge known from the changer inventory, and its fill state."""

    __tablename__ = "scsi_tapes"

    volume: Mapped[str] = mapped_column(String(32), primary_key=True)
    storage_class: Mapped[str | None] = mapped_column(String(255))
    # Nominal capacity, used to choose a tape; the drive's end of medium is what closes it.
    capacity: Mapped[int] = mapped_column(BigInteger)
    used: Mapped[int] = mapped_column(BigInteger, default=0)
    block_size: Mapped[int] = mapped_column(Integer)
    # Logical block id where the next object's header block goes (after the label).
    next_block: Mapped[int] = mapped_column(BigInteger, default=0)
    next_seq: Mapped[int] = mapped_column(Integer, default=1)
    labelled: Mapped[bool] = mapped_column(Boolean, default=False)
    full: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(16), default="ok")  # ok, disabled
    reason: Mapped[str | None] = mapped_column(Text)


class ScsiObject(Base):
    """SCSI library: one object on a cartridge, with the block id of its header block."""

    __tablename__ = "scsi_objects"

    bfid: Mapped[str] = mapped_column(String(64), primary_key=True)
    pnfsid: Mapped[str] = mapped_column(String(64), index=True)
    volume: Mapped[str] = mapped_column(String(32))
    seq: Mapped[int] = mapped_column(Integer)
    block: Mapped[int] = mapped_column(BigInteger)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)  # bytes written before it
    size: Mapped[int] = mapped_column(BigInteger)
    adler32: Mapped[str] = mapped_column(String(16))
    storage_class: Mapped[str | None] = mapped_column(String(255))
    written_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    __table_args__ = (Index("uq_scsi_objects_volume_seq", "volume", "seq", unique=True),)

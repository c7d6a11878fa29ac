"""JSON shapes of API objects, from domain views (tssd/domain.py), never ORM rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tssd.domain import Request


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def request_json(row: Request) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "state": row.state,
        "pnfsid": row.pnfsid,
        "path": row.path,
        "size": row.size,
        "storage_class": row.storage_class,
        "checksum": row.checksum,
        "hsm_type": row.hsm_type,
        "hsm_instance": row.hsm_instance,
        "store": row.store,
        "group": row.group,
        "bfid": row.bfid,
        "uri": row.uri,
        "queue": row.queue,
        "priority": row.priority,
        "volume": row.volume,
        "position": row.position,
        "drive": row.drive,
        "attempts": row.attempts,
        "adler32": row.result_adler32,
        "error_code": row.error_code,
        "error": row.error,
        "created_at": iso(row.created_at),
        "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at),
        "updated_at": iso(row.updated_at),
        "delivery": row.delivery,
    }

"""Indexes for a million pending requests: listing pages, queue figures, retention

Revision ID: 0004e
Revises: 0003

``tssctl requests list`` pages in id order by state, state and kind, or queue; the
scheduler claims removals and migrations by state and kind in id order and locates the
oldest recalls without a tape (a small partial index); retention
deletes finished requests by their finish time: each of these is an index range scan
here, never a walk or a sort of ``requests`` (docs/operations.md, "Scale").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004e"
down_revision: str | Sequence[str] | None = "0004c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNLOCATED = "state = 'queued' AND kind = 'recall' AND volume IS NULL"


def upgrade() -> None:
    op.create_index("ix_requests_state_id", "requests", ["state", "id"])
    op.create_index("ix_requests_state_kind_id", "requests", ["state", "kind", "id"])
    op.create_index("ix_requests_queue_id", "requests", ["queue", "id"])
    op.create_index("ix_requests_finished_at", "requests", ["finished_at"])
    op.create_index(
        "ix_requests_unlocated",
        "requests",
        ["id"],
        sqlite_where=sa.text(UNLOCATED),
        postgresql_where=sa.text(UNLOCATED),
    )


def downgrade() -> None:
    op.drop_index("ix_requests_unlocated", table_name="requests")
    op.drop_index("ix_requests_finished_at", table_name="requests")
    op.drop_index("ix_requests_queue_id", table_name="requests")
    op.drop_index("ix_requests_state_kind_id", table_name="requests")
    op.drop_index("ix_requests_state_id", table_name="requests")

"""Located queued recalls in arrival order: ix_requests_located_order

Revision ID: 0006
Revises: 0004c

The policies without the in-memory planner (``fifo``) ask on every scheduling pass for
the oldest located queued recalls. With only ``ix_requests_state_kind_volume`` the
database sorted every queued recall by id on each pass (quadratic over a campaign);
this partial index hands them out in id order. Partial (``volume IS NOT NULL``) so the
query for unlocated recalls keeps its own plan.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCATED = "volume IS NOT NULL"


def upgrade() -> None:
    op.create_index(
        "ix_requests_located_order",
        "requests",
        ["state", "kind", "id"],
        sqlite_where=sa.text(LOCATED),
        postgresql_where=sa.text(LOCATED),
    )


def downgrade() -> None:
    op.drop_index("ix_requests_located_order", table_name="requests")

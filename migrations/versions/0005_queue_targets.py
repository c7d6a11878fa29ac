"""A latency target per queue

Revision ID: 0005
Revises: 0004c

``queues.latency_target_s``: the time within which the queue's requests should be done
(``tssctl queues set NAME --target 1h``, or ``[[queues]]`` in the configuration). NULL
means no target: the queue is scheduled by priority and cost alone (docs/scheduling.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004e"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.add_column(sa.Column("latency_target_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queues") as batch:
        batch.drop_column("latency_target_s")

"""Recalls delivered through the pool's own call: requests.delivery

Revision ID: 0004a
Revises: 0003

``delivery = 'claim'`` marks a recall (submitted by tss-hsm) whose file tssd leaves as a
part file beside its destination for the pool's next call to rename into place; a part
file nobody claims ends the request in the new state ``abandoned`` (a string column: no
constraint to change).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004a"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("delivery", sa.String(length=8), nullable=True))
    op.create_index("ix_requests_delivery_state", "requests", ["delivery", "state", "finished_at"])


def downgrade() -> None:
    op.drop_index("ix_requests_delivery_state", table_name="requests")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("delivery")

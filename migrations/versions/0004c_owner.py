"""The submitting pool's uid on each request

Revision ID: 0004c
Revises: 0003

``requests.owner_uid``: the uid of the Unix socket peer that submitted the request (the
"pool" role), so that a pool may cancel only its own requests (docs/reliability.md).
NULL for requests submitted by an operator, over TCP, or before this revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004c"
down_revision: str | Sequence[str] | None = "0004a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("owner_uid", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("owner_uid")

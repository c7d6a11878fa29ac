"""SCSI library catalog: scsi_tapes, scsi_objects

Revision ID: 0002
Revises: 0001

The catalog of the SCSI tape library backend (tssd.backends.scsi): which cartridges the
changer holds, how far each is written, and the logical block id of every object.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scsi_tapes",
        sa.Column("volume", sa.String(length=32), nullable=False),
        sa.Column("storage_class", sa.String(length=255), nullable=True),
        sa.Column("capacity", sa.BigInteger(), nullable=False),
        sa.Column("used", sa.BigInteger(), nullable=False),
        sa.Column("block_size", sa.Integer(), nullable=False),
        sa.Column("next_block", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.Integer(), nullable=False),
        sa.Column("labelled", sa.Boolean(), nullable=False),
        sa.Column("full", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("volume", name=op.f("pk_scsi_tapes")),
    )
    op.create_table(
        "scsi_objects",
        sa.Column("bfid", sa.String(length=64), nullable=False),
        sa.Column("pnfsid", sa.String(length=64), nullable=False),
        sa.Column("volume", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("block", sa.BigInteger(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("adler32", sa.String(length=16), nullable=False),
        sa.Column("storage_class", sa.String(length=255), nullable=True),
        sa.Column("written_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("bfid", name=op.f("pk_scsi_objects")),
    )
    op.create_index(op.f("ix_scsi_objects_pnfsid"), "scsi_objects", ["pnfsid"])
    op.create_index(
        op.f("uq_scsi_objects_volume_seq"), "scsi_objects", ["volume", "seq"], unique=True
    )


def downgrade() -> None:
    op.drop_table("scsi_objects")
    op.drop_table("scsi_tapes")

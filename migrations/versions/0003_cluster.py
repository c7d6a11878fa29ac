"""Several instances on one database: instances, drive and request owners

Revision ID: 0003
Revises: 0002

tssd.cluster: every daemon registers in ``instances`` and renews its heartbeat there;
``drives.instance`` names the instance a drive is attached to and ``requests.instance``
the one that claimed an active request, so a survivor can release a dead one's work.
On PostgreSQL triggers announce to every instance work that became queued or was located
on a tape (``NOTIFY tssd_work``) and requests that finished (``NOTIFY tssd_done``, payload the request id).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


NOTIFY_FUNCTION = """
CREATE FUNCTION tssd_notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tssd_work', '');
    RETURN NULL;
END
$$
"""
NOTIFY_TRIGGER = """
CREATE TRIGGER tssd_requests_queued AFTER INSERT OR UPDATE OF state, volume ON requests
FOR EACH ROW WHEN (NEW.state = 'queued') EXECUTE FUNCTION tssd_notify_work()
"""
DONE_FUNCTION = """
CREATE FUNCTION tssd_notify_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tssd_done', NEW.id::text);
    RETURN NULL;
END
$$
"""
DONE_TRIGGER = """
CREATE TRIGGER tssd_requests_done AFTER UPDATE OF state ON requests
FOR EACH ROW WHEN (NEW.state IN ('done', 'failed', 'cancelled') AND OLD.state <> NEW.state)
EXECUTE FUNCTION tssd_notify_done()
"""


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instances")),
    )
    with op.batch_alter_table("drives") as batch:
        batch.add_column(sa.Column("instance", sa.String(length=128), nullable=True))
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("instance", sa.String(length=128), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        for statement in (NOTIFY_FUNCTION, NOTIFY_TRIGGER, DONE_FUNCTION, DONE_TRIGGER):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER tssd_requests_done ON requests")
        op.execute("DROP FUNCTION tssd_notify_done()")
        op.execute("DROP TRIGGER tssd_requests_queued ON requests")
        op.execute("DROP FUNCTION tssd_notify_work()")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("instance")
    with op.batch_alter_table("drives") as batch:
        batch.drop_column("instance")
    op.drop_table("instances")

"""Autovacuum settings fit for a queue table (PostgreSQL; nothing on SQLite)

Revision ID: 0007v
Revises: 0006

PostgreSQL's defaults vacuum a table when a fifth of it is dead and analyse it when a
tenth changed: on ``requests`` with ten million finished rows that is two million dead
rows and a million new recalls planned on statistics from before the campaign. A queue
table turns over a small share of itself quickly (insert, claim, finish, and retention's
deletes), so its thresholds here are a few percent; ``request_events`` is appended to and
purged in bulk, the catalog tables grow by imports. Storage parameters are not part of
the schema the ORM describes: the schema comparison of tests/integration/
test_migrations.py does not see them, tests/integration/test_statistics.py does.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007v"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Per table: (vacuum scale factor, analyze scale factor, insert vacuum scale factor).
SETTINGS = {
    "requests": (0.02, 0.01, 0.02),
    "request_events": (0.05, 0.02, 0.05),
    "sim_objects": (0.1, 0.02, 0.05),
    "scsi_objects": (0.1, 0.02, 0.05),
}
#: autovacuum_vacuum_insert_scale_factor exists from PostgreSQL 13 on.
INSERT_SCALE_SINCE = 130000


def _options(vacuum: float, analyze: float, insert: float, server: int) -> str:
    options = [
        f"autovacuum_vacuum_scale_factor = {vacuum}",
        f"autovacuum_analyze_scale_factor = {analyze}",
    ]
    if server >= INSERT_SCALE_SINCE:
        options.append(f"autovacuum_vacuum_insert_scale_factor = {insert}")
    return ", ".join(options)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    server = int(bind.exec_driver_sql("SHOW server_version_num").scalar_one())
    for table, factors in SETTINGS.items():
        op.execute(f"ALTER TABLE {table} SET ({_options(*factors, server)})")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    server = int(bind.exec_driver_sql("SHOW server_version_num").scalar_one())
    for table in SETTINGS:
        names = [o.split(" = ")[0] for o in _options(0, 0, 0, server).split(", ")]
        op.execute(f"ALTER TABLE {table} RESET ({', '.join(names)})")

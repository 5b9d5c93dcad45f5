"""Full text of archival passages: a generated tsvector and a GIN index over (archive_id, fts), so
archival search ranks words as well as vectors and reads only the searched archives' matches
(btree_gin, created by the per-agent message index, lets GIN index archive_id).

Revision ID: 3e8a1f6c2b94
Revises: 7c3d5e9f1a27
Create Date: 2026-12-01 21:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "3e8a1f6c2b94"
down_revision = "7c3d5e9f1a27"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.add_column(
        "passage",
        sa.Column("fts", postgresql.TSVECTOR(), sa.Computed("to_tsvector('english', text)", persisted=True), nullable=False),
    )
    op.create_index("ix_passage_archive_id_fts", "passage", ["archive_id", "fts"], unique=False, postgresql_using="gin")


def downgrade() -> None:
    op.drop_index("ix_passage_archive_id_fts", table_name="passage", postgresql_using="gin")
    op.drop_column("passage", "fts")

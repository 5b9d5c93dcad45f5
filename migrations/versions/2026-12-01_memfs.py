"""MemFS: an agent's memory as a git repository. The commits served so far (append-only), the git
objects they reach, and the repository's files that are not blocks.

Revision ID: 7d2f4b8e6a10
Revises: 5c1e0a7d9b23
Create Date: 2026-12-01 16:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "7d2f4b8e6a10"
down_revision = "5c1e0a7d9b23"
branch_labels = None
depends_on = None


def _owned(table: str, *columns: sa.Column, primary_key: tuple[str, ...]) -> None:
    op.create_table(
        table,
        sa.Column("agent_id", sa.String(), nullable=False),
        *columns,
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=f"fk_{table}_agent_id_agent", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=f"fk_{table}_organization_id_organization"),
        sa.PrimaryKeyConstraint(*primary_key, name=f"pk_{table}"),
    )


def upgrade() -> None:
    _owned(
        "memfs_commit",
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(), nullable=False),
        sa.Column("blocks", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        primary_key=("agent_id", "seq"),
    )
    _owned(
        "memfs_object",
        sa.Column("sha", sa.String(), nullable=False),
        sa.Column("type_num", sa.SmallInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        primary_key=("agent_id", "sha"),
    )
    _owned(
        "memfs_file",
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("mode", sa.Integer(), nullable=False),
        sa.Column("blob_sha", sa.String(), nullable=False),
        primary_key=("agent_id", "path"),
    )


def downgrade() -> None:
    for table in ("memfs_file", "memfs_object", "memfs_commit"):
        op.drop_table(table)

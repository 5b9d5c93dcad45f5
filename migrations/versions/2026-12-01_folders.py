"""Folders (Letta's sources) and the agents they are attached to. Their files come in a later migration.

Revision ID: 3b8e5f1a7c42
Revises: 7d2f4b8e6a10
Create Date: 2026-12-01 16:10:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "3b8e5f1a7c42"
down_revision = "7d2f4b8e6a10"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "folder",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("instructions", sa.Text(), nullable=True),
        sa.Column("embedding_model", sa.String(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_folder_organization_id_organization"),
        sa.PrimaryKeyConstraint("id", name="pk_folder"),
        sa.UniqueConstraint("organization_id", "name", name="uq_folder_organization_id_name"),
    )
    op.create_table(
        "agent_folder",
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("folder_id", sa.String(), nullable=False),
        sa.Column("position", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name="fk_agent_folder_agent_id_agent", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["folder_id"], ["folder.id"], name="fk_agent_folder_folder_id_folder", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_agent_folder_organization_id_organization"),
        sa.PrimaryKeyConstraint("agent_id", "folder_id", name="pk_agent_folder"),
    )
    op.create_index("ix_agent_folder_folder_id", "agent_folder", ["folder_id"], unique=False)


def downgrade() -> None:
    op.drop_table("agent_folder")
    op.drop_table("folder")

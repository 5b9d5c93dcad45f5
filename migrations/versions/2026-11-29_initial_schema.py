"""Initial schema: pgvector, agents, core-memory blocks, attachments and block history.

Revision ID: 2f7b3e8220e3
Revises:
Create Date: 2026-11-29 22:44:02.395360
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "2f7b3e8220e3"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # pgvector: archival passages and message embeddings build on it in later revisions.
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "agent",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("agent_type", sa.String(), nullable=False),
        sa.Column("system", sa.Text(), nullable=False),
        sa.Column("memory_render_mode", sa.String(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("embedding", sa.Text(), nullable=True),
        sa.Column("llm_config", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("embedding_config", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("context_window_limit", sa.Integer(), nullable=True),
        sa.Column("timezone", sa.String(), nullable=False),
        sa.Column("compiled_system", sa.Text(), nullable=False),
        sa.Column("system_compiled_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent")),
    )
    op.create_index("ix_agent_created_at_id", "agent", ["created_at", "id"], unique=False)
    op.create_index("ix_agent_tags", "agent", ["tags"], unique=False, postgresql_using="gin")
    op.create_table(
        "block",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("char_limit", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("hidden", sa.Boolean(), nullable=True),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.CheckConstraint("label <> ''", name=op.f("ck_block_label_not_empty")),
        sa.CheckConstraint("char_length(value) <= char_limit", name=op.f("ck_block_value_within_limit")),
        sa.CheckConstraint("char_limit > 0", name=op.f("ck_block_limit_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_block")),
        sa.UniqueConstraint("id", "label", name="uq_block_id_label"),
    )
    op.create_index("ix_block_created_at_id", "block", ["created_at", "id"], unique=False)
    op.create_index("ix_block_label", "block", ["label"], unique=False)
    op.create_table(
        "block_change",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("block_id", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("change", sa.String(), nullable=False),
        sa.Column("actor_type", sa.String(), nullable=False),
        sa.Column("actor_id", sa.String(), nullable=True),
        sa.Column("step_id", sa.String(), nullable=True),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("char_limit", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_block_change")),
    )
    op.create_index(op.f("ix_block_change_block_id"), "block_change", ["block_id"], unique=False)
    op.create_table(
        "agent_block",
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("block_id", sa.String(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_agent_block_agent_id_agent"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["block_id", "label"],
            ["block.id", "block.label"],
            name="fk_agent_block_block",
            onupdate="CASCADE",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "block_id", name=op.f("pk_agent_block")),
        sa.UniqueConstraint("agent_id", "label", name="uq_agent_block_agent_id_label"),
    )
    op.create_index(op.f("ix_agent_block_block_id"), "agent_block", ["block_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_agent_block_block_id"), table_name="agent_block")
    op.drop_table("agent_block")
    op.drop_index(op.f("ix_block_change_block_id"), table_name="block_change")
    op.drop_table("block_change")
    op.drop_index("ix_block_label", table_name="block")
    op.drop_index("ix_block_created_at_id", table_name="block")
    op.drop_table("block")
    op.drop_index("ix_agent_tags", table_name="agent", postgresql_using="gin")
    op.drop_index("ix_agent_created_at_id", table_name="agent")
    op.drop_table("agent")

"""Conversations: threads of one agent over its shared memory. The agent's existing history stays
where it is, as its default conversation (conversation_id NULL on its messages and runs).

Revision ID: 5c1e0a7d9b23
Revises: 9f49647870c4
Create Date: 2026-12-01 15:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "5c1e0a7d9b23"
down_revision = "9f49647870c4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _conversation_tables()
    op.add_column("message", sa.Column("conversation_id", sa.String(), nullable=True))
    op.create_foreign_key(
        "fk_message_conversation_id_conversation", "message", "conversation", ["conversation_id"], ["id"], ondelete="CASCADE"
    )
    # The window of one conversation: the agent's default one is conversation_id IS NULL.
    op.drop_index("ix_message_in_context", table_name="message")
    op.create_index(
        "ix_message_in_context", "message", ["agent_id", "conversation_id", "seq"], postgresql_where=sa.text("in_context")
    )
    op.create_index(
        "ix_message_conversation_id_seq",
        "message",
        ["conversation_id", "seq"],
        postgresql_where=sa.text("conversation_id IS NOT NULL"),
    )
    op.add_column("run", sa.Column("conversation_id", sa.String(), nullable=True))
    op.create_foreign_key(
        "fk_run_conversation_id_conversation", "run", "conversation", ["conversation_id"], ["id"], ondelete="CASCADE"
    )
    op.create_index("ix_run_conversation_id", "run", ["conversation_id"], postgresql_where=sa.text("conversation_id IS NOT NULL"))
    op.add_column("step", sa.Column("conversation_id", sa.String(), nullable=True))


def _conversation_tables() -> None:
    op.create_table(
        "conversation",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("model_settings", postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), nullable=True),
        sa.Column("context_window_limit", sa.Integer(), nullable=True),
        sa.Column("hidden", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pending_approval", postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), nullable=True),
        sa.Column("last_message_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_run_completion", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_by_id", sa.String(), nullable=True),
        sa.Column("last_updated_by_id", sa.String(), nullable=True),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name="fk_conversation_agent_id_agent", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_conversation_organization_id_organization"),
        sa.PrimaryKeyConstraint("id", name="pk_conversation"),
    )
    op.create_index("ix_conversation_agent_id_created_at_id", "conversation", ["agent_id", "created_at", "id"])
    op.create_table(
        "conversation_block",
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("block_id", sa.String(), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["block_id", "label"],
            ["block.id", "block.label"],
            name="fk_conversation_block_block",
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversation.id"],
            name="fk_conversation_block_conversation_id_conversation",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"], ["organization.id"], name="fk_conversation_block_organization_id_organization"
        ),
        sa.PrimaryKeyConstraint("conversation_id", "label", name="pk_conversation_block"),
        sa.UniqueConstraint("block_id", name="uq_conversation_block_block_id"),
    )


def downgrade() -> None:
    op.drop_column("step", "conversation_id")
    op.drop_index("ix_run_conversation_id", table_name="run")
    op.drop_constraint("fk_run_conversation_id_conversation", "run", type_="foreignkey")
    op.drop_column("run", "conversation_id")
    op.drop_index("ix_message_conversation_id_seq", table_name="message")
    op.drop_index("ix_message_in_context", table_name="message")
    op.create_index("ix_message_in_context", "message", ["agent_id", "seq"], postgresql_where=sa.text("in_context"))
    op.drop_constraint("fk_message_conversation_id_conversation", "message", type_="foreignkey")
    op.drop_column("message", "conversation_id")
    op.drop_table("conversation_block")
    op.drop_index("ix_conversation_agent_id_created_at_id", table_name="conversation")
    op.drop_table("conversation")

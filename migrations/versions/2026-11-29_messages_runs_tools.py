"""Conversation messages (with context-window flag and otid de-duplication), runs, and tools.

Revision ID: 8d2890aba081
Revises: 2f7b3e8220e3
Create Date: 2026-11-29 23:00:11.171120
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "8d2890aba081"
down_revision = "2f7b3e8220e3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("tool_type", sa.String(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("json_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool")),
        sa.UniqueConstraint("name", name=op.f("uq_tool_name")),
    )
    op.create_table(
        "agent_tool",
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("tool_id", sa.String(), nullable=False),
        sa.Column("position", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_agent_tool_agent_id_agent"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["tool_id"], ["tool.id"], name=op.f("fk_agent_tool_tool_id_tool"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "tool_id", name=op.f("pk_agent_tool")),
    )
    op.create_index(op.f("ix_agent_tool_tool_id"), "agent_tool", ["tool_id"], unique=False)
    op.create_table(
        "message",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("step_id", sa.String(), nullable=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("reasoning", sa.Text(), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("tool_call_id", sa.String(), nullable=True),
        sa.Column("tool_name", sa.String(), nullable=True),
        sa.Column("tool_status", sa.String(), nullable=True),
        sa.Column("otid", sa.String(), nullable=True),
        sa.Column("sender_id", sa.String(), nullable=True),
        sa.Column("in_context", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_message_agent_id_agent"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message")),
        sa.UniqueConstraint("seq", name=op.f("uq_message_seq")),
    )
    op.create_index("ix_message_agent_id_seq", "message", ["agent_id", "seq"], unique=False)
    op.create_index("ix_message_in_context", "message", ["agent_id", "seq"], unique=False, postgresql_where=sa.text("in_context"))
    op.create_index(op.f("ix_message_run_id"), "message", ["run_id"], unique=False)
    op.create_index(
        "uq_message_agent_id_otid", "message", ["agent_id", "otid"], unique=True, postgresql_where=sa.text("otid IS NOT NULL")
    )
    op.create_table(
        "run",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("stop_reason", sa.String(), nullable=True),
        sa.Column("usage", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_run_agent_id_agent"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
    )
    op.create_index(op.f("ix_run_agent_id"), "run", ["agent_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_run_agent_id"), table_name="run")
    op.drop_table("run")
    op.drop_index("uq_message_agent_id_otid", table_name="message", postgresql_where=sa.text("otid IS NOT NULL"))
    op.drop_index(op.f("ix_message_run_id"), table_name="message")
    op.drop_index("ix_message_in_context", table_name="message", postgresql_where=sa.text("in_context"))
    op.drop_index("ix_message_agent_id_seq", table_name="message")
    op.drop_table("message")
    op.drop_index(op.f("ix_agent_tool_tool_id"), table_name="agent_tool")
    op.drop_table("agent_tool")
    op.drop_table("tool")

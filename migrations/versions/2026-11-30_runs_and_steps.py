"""Runs keep their options, timings, a cancel request and their events (background runs replay them);
a step row per model call.

Revision ID: 3c9a7d5e1f20
Revises: 8b3f6e1d2c75
Create Date: 2026-11-30 17:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "3c9a7d5e1f20"
down_revision = "8b3f6e1d2c75"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("run", sa.Column("request_config", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("run", sa.Column("background", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    op.add_column("run", sa.Column("ttft_ns", sa.BigInteger(), nullable=True))
    op.add_column("run", sa.Column("total_duration_ns", sa.BigInteger(), nullable=True))
    op.add_column("run", sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("run", sa.Column("callback_url", sa.String(), nullable=True))
    op.add_column("run", sa.Column("callback_sent_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("run", sa.Column("callback_status_code", sa.Integer(), nullable=True))
    op.add_column("run", sa.Column("callback_error", sa.String(), nullable=True))
    op.create_index("ix_run_organization_id_created_at_id", "run", ["organization_id", "created_at", "id"], unique=False)
    op.create_table(
        "step",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("stop_reason", sa.String(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("model_ms", sa.Float(), nullable=True),
        sa.Column("server_ms", sa.Float(), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("error_type", sa.String(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_step_agent_id_agent"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_step_run_id_run"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=op.f("fk_step_organization_id_organization")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_step")),
    )
    op.create_index(op.f("ix_step_agent_id"), "step", ["agent_id"], unique=False)
    op.create_index(op.f("ix_step_run_id"), "step", ["run_id"], unique=False)
    op.create_index("ix_step_organization_id_created_at_id", "step", ["organization_id", "created_at", "id"], unique=False)
    op.create_table(
        "run_event",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=op.f("fk_run_event_run_id_run"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=op.f("fk_run_event_organization_id_organization")),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_event")),
    )


def downgrade() -> None:
    op.drop_table("run_event")
    op.drop_table("step")
    op.drop_index("ix_run_organization_id_created_at_id", table_name="run")
    dropped = ("callback_error", "callback_status_code", "callback_sent_at", "callback_url", "cancel_requested_at")
    for column in (*dropped, "total_duration_ns", "ttft_ns", "background", "request_config"):
        op.drop_column("run", column)

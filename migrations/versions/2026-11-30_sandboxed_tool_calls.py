"""Sandboxed tool calls: a tool result keeps the call's stdout and stderr; an agent keeps the
variables (secrets) its tools run with.

Revision ID: 5d0e2b7c9a41
Revises: c6b4786dffb6
Create Date: 2026-11-30 15:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "5d0e2b7c9a41"
down_revision = "c6b4786dffb6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("message", sa.Column("tool_stdout", sa.Text(), nullable=True))
    op.add_column("message", sa.Column("tool_stderr", sa.Text(), nullable=True))
    op.add_column(
        "agent",
        sa.Column("tool_secrets", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("agent", "tool_secrets")
    op.drop_column("message", "tool_stderr")
    op.drop_column("message", "tool_stdout")

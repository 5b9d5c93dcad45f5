"""Agents keep their tool rules (Letta's `tool_rules`), enforced by the step loop, and the tool calls
a stopped turn waits on (approvals, client-side tools) until the client answers.

Revision ID: 8b3f6e1d2c75
Revises: 5d0e2b7c9a41
Create Date: 2026-11-30 16:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "8b3f6e1d2c75"
down_revision = "5d0e2b7c9a41"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "agent",
        sa.Column("tool_rules", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    )
    op.add_column("agent", sa.Column("pending_approval", postgresql.JSONB(astext_type=sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("agent", "pending_approval")
    op.drop_column("agent", "tool_rules")

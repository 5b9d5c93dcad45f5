"""Agents keep Letta's `message_buffer_autoclear`: when true, a finished turn leaves nothing of the
conversation in the context window (the messages stay stored and searchable).

Revision ID: 9e4a1c6b2d87
Revises: 3c9a7d5e1f20
Create Date: 2026-12-01 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "9e4a1c6b2d87"
down_revision = "3c9a7d5e1f20"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agent", sa.Column("message_buffer_autoclear", sa.Boolean(), server_default=sa.text("false"), nullable=False))


def downgrade() -> None:
    op.drop_column("agent", "message_buffer_autoclear")

"""A step's feedback (positive or negative) and its tags, as clients set them with PATCH /v1/steps/{id}/feedback.

Revision ID: 6a2b4c8d0e96
Revises: 5e1f3a9c2d74
Create Date: 2026-12-01 18:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "6a2b4c8d0e96"
down_revision = "5e1f3a9c2d74"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("step", sa.Column("feedback", sa.String(), nullable=True))
    op.add_column("step", sa.Column("tags", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False))


def downgrade() -> None:
    op.drop_column("step", "tags")
    op.drop_column("step", "feedback")

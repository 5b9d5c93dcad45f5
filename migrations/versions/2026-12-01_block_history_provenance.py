"""Block history names the run and tool call of an agent's edit, and which version an undo, redo
or restore brought back.

Revision ID: 4d7b2e9c1a58
Revises: 9e4a1c6b2d87
Create Date: 2026-12-01 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "4d7b2e9c1a58"
down_revision = "9e4a1c6b2d87"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("block_change", sa.Column("run_id", sa.String(), nullable=True))
    op.add_column("block_change", sa.Column("tool_call_id", sa.String(), nullable=True))
    op.add_column("block_change", sa.Column("restored_version", sa.Integer(), nullable=True))
    # History pages read one block's changes newest first.
    op.create_index("ix_block_change_block_id_version", "block_change", ["block_id", "version"])


def downgrade() -> None:
    op.drop_index("ix_block_change_block_id_version", table_name="block_change")
    op.drop_column("block_change", "restored_version")
    op.drop_column("block_change", "tool_call_id")
    op.drop_column("block_change", "run_id")

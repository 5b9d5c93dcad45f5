"""Custom tools: source code and the options Letta's tools carry; names unique per organization.

Revision ID: c6b4786dffb6
Revises: a73ab8163453
Create Date: 2026-11-30 13:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "c6b4786dffb6"
down_revision = "a73ab8163453"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tool", sa.Column("source_code", sa.Text(), nullable=True))
    op.add_column("tool", sa.Column("source_type", sa.String(), nullable=True))
    op.add_column("tool", sa.Column("args_json_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("tool", sa.Column("return_char_limit", sa.Integer(), server_default=sa.text("50000"), nullable=False))
    op.add_column(
        "tool",
        sa.Column(
            "pip_requirements", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
    )
    op.add_column("tool", sa.Column("default_requires_approval", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    op.add_column("tool", sa.Column("enable_parallel_execution", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    op.add_column(
        "tool",
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    )
    op.drop_constraint("uq_tool_name", "tool", type_="unique")
    op.create_index("uq_tool_builtin_name", "tool", ["name"], unique=True, postgresql_where=sa.text("organization_id IS NULL"))
    op.create_index(
        "uq_tool_organization_id_name",
        "tool",
        ["organization_id", "name"],
        unique=True,
        postgresql_where=sa.text("organization_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_tool_organization_id_name", table_name="tool")
    op.drop_index("uq_tool_builtin_name", table_name="tool")
    op.execute("DELETE FROM tool WHERE organization_id IS NOT NULL")
    op.create_unique_constraint("uq_tool_name", "tool", ["name"])
    for column in (
        "metadata",
        "enable_parallel_execution",
        "default_requires_approval",
        "pip_requirements",
        "return_char_limit",
        "args_json_schema",
        "source_type",
        "source_code",
    ):
        op.drop_column("tool", column)

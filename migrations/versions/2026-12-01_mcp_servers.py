"""MCP servers, and the tools that come from them (tool.mcp_server_id).

Revision ID: 7c3d5e9f1a27
Revises: 6a2b4c8d0e96
Create Date: 2026-12-01 20:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "7c3d5e9f1a27"
down_revision = "6a2b4c8d0e96"
branch_labels = None
depends_on = None

_NOW = sa.text("clock_timestamp()")
_EMPTY = sa.text("'{}'::jsonb")


def upgrade() -> None:
    op.create_table(
        "mcp_server",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("server_name", sa.Text(), nullable=False),
        sa.Column("server_type", sa.String(), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("args", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("network", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("server_url", sa.Text(), nullable=True),
        sa.Column("auth_header", sa.Text(), nullable=True),
        sa.Column("secrets", postgresql.JSONB(astext_type=sa.Text()), server_default=_EMPTY, nullable=False),
        sa.Column("status", sa.String(), server_default=sa.text("'unknown'"), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.CheckConstraint("server_type IN ('stdio', 'sse', 'streamable_http')", name="ck_mcp_server_server_type"),
        sa.CheckConstraint("status IN ('unknown', 'connected', 'error')", name="ck_mcp_server_status"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_mcp_server_organization_id_organization"),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_server"),
        sa.UniqueConstraint("organization_id", "server_name", name="uq_mcp_server_organization_id_server_name"),
    )
    op.add_column("tool", sa.Column("mcp_server_id", sa.String(), nullable=True))
    op.create_foreign_key("fk_tool_mcp_server_id_mcp_server", "tool", "mcp_server", ["mcp_server_id"], ["id"], ondelete="CASCADE")
    op.create_index("ix_tool_mcp_server_id", "tool", ["mcp_server_id"], unique=False)


def downgrade() -> None:
    op.execute("DELETE FROM tool WHERE mcp_server_id IS NOT NULL")
    op.drop_index("ix_tool_mcp_server_id", table_name="tool")
    op.drop_constraint("fk_tool_mcp_server_id_mcp_server", "tool", type_="foreignkey")
    op.drop_column("tool", "mcp_server_id")
    op.drop_table("mcp_server")

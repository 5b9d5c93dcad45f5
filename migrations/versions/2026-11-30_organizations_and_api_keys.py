"""Organizations and API keys; every tenant-owned row carries its organization.

Rows that exist before this migration belong to the `default` organization (the one unauthenticated
local use and the admin key act in). Built-in tools keep no organization: every organization shares
them.

Revision ID: a73ab8163453
Revises: 87555ae4a455
Create Date: 2026-11-30 12:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "a73ab8163453"
down_revision = "87555ae4a455"
branch_labels = None
depends_on = None

DEFAULT_ORGANIZATION_ID = "org-00000000-0000-4000-8000-000000000000"  # memvm.actors, as of this revision
TENANT_TABLES = (
    "agent",
    "agent_block",
    "block",
    "block_change",
    "archive",
    "agent_archive",
    "passage",
    "message",
    "run",
    "agent_tool",
)


def upgrade() -> None:
    op.create_table(
        "organization",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organization")),
        sa.UniqueConstraint("name", name=op.f("uq_organization_name")),
    )
    op.create_table(
        "api_key",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("prefix", sa.String(), nullable=False),
        sa.Column("secret_sha256", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=op.f("fk_api_key_organization_id_organization")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("secret_sha256", name=op.f("uq_api_key_secret_sha256")),
    )
    op.create_index(op.f("ix_api_key_organization_id"), "api_key", ["organization_id"], unique=False)
    op.execute(f"INSERT INTO organization (id, name) VALUES ('{DEFAULT_ORGANIZATION_ID}', 'default')")

    for table in TENANT_TABLES:
        op.add_column(table, sa.Column("organization_id", sa.String(), nullable=True))
        op.execute(f"UPDATE {table} SET organization_id = '{DEFAULT_ORGANIZATION_ID}'")
        op.alter_column(table, "organization_id", nullable=False)
        op.create_foreign_key(
            op.f(f"fk_{table}_organization_id_organization"), table, "organization", ["organization_id"], ["id"]
        )
    op.add_column("tool", sa.Column("organization_id", sa.String(), nullable=True))
    op.create_foreign_key(op.f("fk_tool_organization_id_organization"), "tool", "organization", ["organization_id"], ["id"])

    # Listings are per organization now: newest or oldest first within it.
    op.drop_index("ix_agent_created_at_id", table_name="agent")
    op.create_index("ix_agent_organization_id_created_at_id", "agent", ["organization_id", "created_at", "id"], unique=False)
    op.drop_index("ix_block_created_at_id", table_name="block")
    op.create_index("ix_block_organization_id_created_at_id", "block", ["organization_id", "created_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_block_organization_id_created_at_id", table_name="block")
    op.create_index("ix_block_created_at_id", "block", ["created_at", "id"], unique=False)
    op.drop_index("ix_agent_organization_id_created_at_id", table_name="agent")
    op.create_index("ix_agent_created_at_id", "agent", ["created_at", "id"], unique=False)
    for table in (*TENANT_TABLES, "tool"):
        op.drop_constraint(op.f(f"fk_{table}_organization_id_organization"), table, type_="foreignkey")
        op.drop_column(table, "organization_id")
    op.drop_index(op.f("ix_api_key_organization_id"), table_name="api_key")
    op.drop_table("api_key")
    op.drop_table("organization")

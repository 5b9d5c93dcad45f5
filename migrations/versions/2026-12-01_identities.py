"""Identities and the agents and blocks that belong to them.

Revision ID: 5e1f3a9c2d74
Revises: 4c9d2e7f1b85
Create Date: 2026-12-01 18:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "5e1f3a9c2d74"
down_revision = "4c9d2e7f1b85"
branch_labels = None
depends_on = None

_NOW = sa.text("clock_timestamp()")


def _link_table(table: str, member: str) -> None:
    """identity_agent or identity_block: a link goes with its identity and with its member."""
    column = f"{member}_id"
    op.create_table(
        table,
        sa.Column("identity_id", sa.String(), nullable=False),
        sa.Column(column, sa.String(), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["identity_id"], ["identity.id"], name=f"fk_{table}_identity_id_identity", ondelete="CASCADE"),
        sa.ForeignKeyConstraint([column], [f"{member}.id"], name=f"fk_{table}_{column}_{member}", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=f"fk_{table}_organization_id_organization"),
        sa.PrimaryKeyConstraint("identity_id", column, name=f"pk_{table}"),
    )
    op.create_index(f"ix_{table}_{column}", table, [column], unique=False)


def upgrade() -> None:
    op.create_table(
        "identity",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("identifier_key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("identity_type", sa.String(), nullable=False),
        sa.Column("project_id", sa.String(), nullable=True),
        sa.Column("properties", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.CheckConstraint("identity_type IN ('org', 'user', 'other')", name="ck_identity_identity_type"),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_identity_organization_id_organization"),
        sa.PrimaryKeyConstraint("id", name="pk_identity"),
        sa.UniqueConstraint("organization_id", "identifier_key", name="uq_identity_organization_id_identifier_key"),
    )
    _link_table("identity_agent", "agent")
    _link_table("identity_block", "block")


def downgrade() -> None:
    op.drop_table("identity_block")
    op.drop_table("identity_agent")
    op.drop_table("identity")

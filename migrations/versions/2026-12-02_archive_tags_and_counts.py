"""Each archive's passage count and its tags with how many passages carry each, kept with the passages:
a prompt's <memory_metadata> then reads one row per archive and at most its first tags from an index,
instead of counting and unnesting every passage on each recompile. Filled from the passages there are.

Revision ID: 6d2f8b4e1a73
Revises: 5c1e7a9d3b20
Create Date: 2026-12-02 13:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "6d2f8b4e1a73"
down_revision = "5c1e7a9d3b20"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("archive", sa.Column("passage_count", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "archive_tag",
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.Column("archive_id", sa.String(), nullable=False),
        sa.Column("tag", sa.Text(), nullable=False),
        sa.Column("passages", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name="fk_archive_tag_organization_id_organization"),
        sa.ForeignKeyConstraint(
            ["organization_id", "archive_id"],
            ["archive.organization_id", "archive.id"],
            name="fk_archive_tag_archive_id_archive",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("organization_id", "archive_id", "tag", name="pk_archive_tag"),
    )
    op.execute(
        "UPDATE archive SET passage_count = counted.passages FROM"
        " (SELECT organization_id, archive_id, count(*) AS passages FROM passage GROUP BY 1, 2) AS counted"
        " WHERE archive.organization_id = counted.organization_id AND archive.id = counted.archive_id"
    )
    op.execute(
        "INSERT INTO archive_tag (organization_id, archive_id, tag, passages)"
        " SELECT organization_id, archive_id, tag, count(*) FROM passage, unnest(passage.tags) AS tag GROUP BY 1, 2, 3"
    )


def downgrade() -> None:
    op.drop_table("archive_tag")
    op.drop_column("archive", "passage_count")

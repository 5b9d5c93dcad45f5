"""Archival memory (archives, passages with embeddings) and hybrid message search (tsvector + embeddings).

Revision ID: fc98feacdd8a
Revises: 8d2890aba081
Create Date: 2026-11-29 23:24:15.475992
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision = "fc98feacdd8a"
down_revision = "8d2890aba081"
branch_labels = None
depends_on = None

# Fixed here, not imported: a migration must not change when application code does.
INDEXED_DIMENSIONS = (384, 768, 1024, 1536)


def upgrade() -> None:
    op.create_table(
        "archive",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("embedding_model", sa.String(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_archive")),
    )
    op.create_table(
        "passage",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("archive_id", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.Column("embedding_model", sa.String(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("writer_type", sa.String(), nullable=False),
        sa.Column("writer_id", sa.String(), nullable=True),
        sa.Column("step_id", sa.String(), nullable=True),
        sa.Column("source_message_id", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("clock_timestamp()"), nullable=False),
        sa.ForeignKeyConstraint(["archive_id"], ["archive.id"], name=op.f("fk_passage_archive_id_archive"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_passage")),
    )
    op.create_index("ix_passage_archive_id_created_at", "passage", ["archive_id", "created_at"], unique=False)
    op.create_index("ix_passage_tags", "passage", ["tags"], unique=False, postgresql_using="gin")
    op.create_table(
        "agent_archive",
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("archive_id", sa.String(), nullable=False),
        sa.Column("position", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_agent_archive_agent_id_agent"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["archive_id"], ["archive.id"], name=op.f("fk_agent_archive_archive_id_archive"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("agent_id", "archive_id", name=op.f("pk_agent_archive")),
    )
    op.create_index(op.f("ix_agent_archive_archive_id"), "agent_archive", ["archive_id"], unique=False)
    op.add_column("agent", sa.Column("default_archive_id", sa.String(), nullable=True))
    op.create_foreign_key(
        op.f("fk_agent_default_archive_id_archive"), "agent", "archive", ["default_archive_id"], ["id"], ondelete="SET NULL"
    )
    op.add_column(
        "message",
        sa.Column(
            "fts",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('english', coalesce(content, ''))", persisted=True),
            nullable=False,
        ),
    )
    op.add_column("message", sa.Column("embedding", Vector(), nullable=True))
    op.add_column("message", sa.Column("embedding_model", sa.String(), nullable=True))
    op.add_column("message", sa.Column("embedding_dim", sa.Integer(), nullable=True))
    op.add_column("message", sa.Column("embed_claimed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("message", sa.Column("embed_attempts", sa.Integer(), server_default=sa.text("0"), nullable=False))
    op.create_index(
        "ix_message_embedding_queue",
        "message",
        ["seq"],
        unique=False,
        postgresql_where=sa.text("embedding IS NULL AND kind = 'message' AND coalesce(content, '') <> '' AND embed_attempts < 5"),
    )
    op.create_index("ix_message_fts", "message", ["fts"], unique=False, postgresql_using="gin")
    for table in ("passage", "message"):
        for dim in INDEXED_DIMENSIONS:
            op.execute(
                f"CREATE INDEX ix_{table}_embedding_{dim} ON {table} USING hnsw "
                f"((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}"
            )


def downgrade() -> None:
    for table in ("passage", "message"):
        for dim in INDEXED_DIMENSIONS:
            op.execute(f"DROP INDEX ix_{table}_embedding_{dim}")
    op.drop_index("ix_message_fts", table_name="message", postgresql_using="gin")
    op.drop_index(
        "ix_message_embedding_queue",
        table_name="message",
        postgresql_where=sa.text("embedding IS NULL AND kind = 'message' AND coalesce(content, '') <> '' AND embed_attempts < 5"),
    )
    op.drop_column("message", "embed_attempts")
    op.drop_column("message", "embed_claimed_at")
    op.drop_column("message", "embedding_dim")
    op.drop_column("message", "embedding_model")
    op.drop_column("message", "embedding")
    op.drop_column("message", "fts")
    op.drop_constraint(op.f("fk_agent_default_archive_id_archive"), "agent", type_="foreignkey")
    op.drop_column("agent", "default_archive_id")
    op.drop_index(op.f("ix_agent_archive_archive_id"), table_name="agent_archive")
    op.drop_table("agent_archive")
    op.drop_index("ix_passage_tags", table_name="passage", postgresql_using="gin")
    op.drop_index("ix_passage_archive_id_created_at", table_name="passage")
    op.drop_table("passage")
    op.drop_table("archive")

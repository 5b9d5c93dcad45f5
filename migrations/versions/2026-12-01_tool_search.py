"""Tool search (POST /v1/tools/search): each tool keeps the text search reads of it, a full-text
document over that text and its source, and a vector filled by the embedding queue.

Revision ID: 9f49647870c4
Revises: 4d7b2e9c1a58
Create Date: 2026-12-01 13:00:00
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision = "9f49647870c4"
down_revision = "4d7b2e9c1a58"
branch_labels = None
depends_on = None

# Fixed here, not imported: a migration must not change when application code does.
INDEXED_DIMENSIONS = (384, 768, 1024, 1536)
QUEUE_PREDICATE = "embedding IS NULL AND embed_attempts < 5"
FTS = (
    "setweight(to_tsvector('english', name), 'A') || setweight(to_tsvector('english', search_text), 'B')"
    " || setweight(to_tsvector('english', coalesce(source_code, '')), 'D')"
)


def upgrade() -> None:
    op.add_column("tool", sa.Column("search_text", sa.Text(), server_default=sa.text("''"), nullable=False))
    # The application writes the full text (parameters included) at the next edit; built-ins at the next start.
    op.execute(
        "UPDATE tool SET search_text = concat_ws(E'\\n', name, description,"
        " CASE WHEN cardinality(tags) > 0 THEN 'Tags: ' || array_to_string(tags, ', ') END)"
    )
    op.add_column("tool", sa.Column("fts", postgresql.TSVECTOR(), sa.Computed(FTS, persisted=True), nullable=False))
    op.add_column("tool", sa.Column("embedding", Vector(), nullable=True))
    op.add_column("tool", sa.Column("embedding_model", sa.String(), nullable=True))
    op.add_column("tool", sa.Column("embedding_dim", sa.Integer(), nullable=True))
    op.add_column("tool", sa.Column("embed_claimed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tool", sa.Column("embed_attempts", sa.Integer(), server_default=sa.text("0"), nullable=False))
    op.create_index("ix_tool_fts", "tool", ["fts"], unique=False, postgresql_using="gin")
    op.create_index("ix_tool_embedding_queue", "tool", ["updated_at"], unique=False, postgresql_where=sa.text(QUEUE_PREDICATE))
    for dim in INDEXED_DIMENSIONS:
        op.execute(
            f"CREATE INDEX ix_tool_embedding_{dim} ON tool USING hnsw "
            f"((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}"
        )


def downgrade() -> None:
    for dim in INDEXED_DIMENSIONS:
        op.execute(f"DROP INDEX ix_tool_embedding_{dim}")
    op.drop_index("ix_tool_embedding_queue", table_name="tool", postgresql_where=sa.text(QUEUE_PREDICATE))
    op.drop_index("ix_tool_fts", table_name="tool", postgresql_using="gin")
    for column in ("embed_attempts", "embed_claimed_at", "embedding_dim", "embedding_model", "embedding", "fts", "search_text"):
        op.drop_column("tool", column)

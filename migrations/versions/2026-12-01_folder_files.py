"""Files of folders, their chunks, each agent's view of them, and the agent's file view settings.

Revision ID: 4c9d2e7f1b85
Revises: 3b8e5f1a7c42
Create Date: 2026-12-01 17:30:00
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

from memvm.orm.vector_index import INDEXED_DIMENSIONS

revision = "4c9d2e7f1b85"
down_revision = "3b8e5f1a7c42"
branch_labels = None
depends_on = None

_NOW = sa.text("clock_timestamp()")


def _tenant(table: str) -> tuple[sa.Column, sa.ForeignKeyConstraint]:
    return (
        sa.Column("organization_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organization.id"], name=f"fk_{table}_organization_id_organization"),
    )


def _references(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}", ondelete="CASCADE")


def upgrade() -> None:
    op.add_column("agent", sa.Column("max_files_open", sa.Integer(), nullable=True))
    op.add_column("agent", sa.Column("per_file_view_window_char_limit", sa.Integer(), nullable=True))
    op.create_table(
        "folder_file",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("folder_id", sa.String(), nullable=False),
        sa.Column("file_name", sa.Text(), nullable=False),
        sa.Column("original_file_name", sa.Text(), nullable=False),
        sa.Column("file_type", sa.String(), nullable=False),
        sa.Column("file_size", sa.BigInteger(), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("line_count", sa.Integer(), nullable=True),
        sa.Column("processing_status", sa.String(), nullable=False),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("total_chunks", sa.Integer(), nullable=True),
        sa.Column("chunks_embedded", sa.Integer(), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        *_tenant("folder_file"),
        _references("folder_file", "folder_id", "folder"),
        sa.CheckConstraint(
            "processing_status IN ('pending', 'parsing', 'embedding', 'completed', 'error')",
            name="ck_folder_file_processing_status",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_folder_file"),
        sa.UniqueConstraint("folder_id", "file_name", name="uq_folder_file_folder_id_file_name"),
    )
    op.create_index("ix_folder_file_folder_id", "folder_file", ["folder_id"])
    op.create_index(
        "ix_folder_file_parse_queue", "folder_file", ["created_at"], postgresql_where=sa.text("processing_status = 'parsing'")
    )
    op.create_table(
        "file_chunk",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("file_id", sa.String(), nullable=False),
        sa.Column("folder_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("start_line", sa.Integer(), nullable=False),
        sa.Column("end_line", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column(
            "fts", sa.dialects.postgresql.TSVECTOR(), sa.Computed("to_tsvector('english', text)", persisted=True), nullable=True
        ),
        sa.Column("embedding", Vector(), nullable=True),
        sa.Column("embedding_model", sa.String(), nullable=True),
        sa.Column("embedding_dim", sa.Integer(), nullable=True),
        sa.Column("embed_claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("embed_attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        *_tenant("file_chunk"),
        _references("file_chunk", "file_id", "folder_file"),
        _references("file_chunk", "folder_id", "folder"),
        sa.PrimaryKeyConstraint("id", name="pk_file_chunk"),
        sa.UniqueConstraint("file_id", "seq", name="uq_file_chunk_file_id_seq"),
    )
    op.create_index("ix_file_chunk_folder_id_fts", "file_chunk", ["folder_id", "fts"], postgresql_using="gin")
    op.create_index(
        "ix_file_chunk_embedding_queue",
        "file_chunk",
        ["id"],
        postgresql_where=sa.text("embedding IS NULL AND embed_attempts < 5"),
    )
    for dim in INDEXED_DIMENSIONS:
        op.execute(
            f"CREATE INDEX ix_file_chunk_embedding_{dim} ON file_chunk USING hnsw "
            f"((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}"
        )
    op.create_table(
        "agent_file",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("file_id", sa.String(), nullable=False),
        sa.Column("folder_id", sa.String(), nullable=False),
        sa.Column("is_open", sa.Boolean(), nullable=False),
        sa.Column("start_line", sa.Integer(), nullable=True),
        sa.Column("end_line", sa.Integer(), nullable=True),
        sa.Column("visible_content", sa.Text(), nullable=True),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        *_tenant("agent_file"),
        _references("agent_file", "agent_id", "agent"),
        _references("agent_file", "file_id", "folder_file"),
        _references("agent_file", "folder_id", "folder"),
        sa.PrimaryKeyConstraint("id", name="pk_agent_file"),
        sa.UniqueConstraint("agent_id", "file_id", name="uq_agent_file_agent_id_file_id"),
    )
    op.create_index("ix_agent_file_file_id", "agent_file", ["file_id"])
    op.create_index("ix_agent_file_agent_id_open", "agent_file", ["agent_id", "is_open", "last_accessed_at"])


def downgrade() -> None:
    for table in ("agent_file", "file_chunk", "folder_file"):
        op.drop_table(table)
    op.drop_column("agent", "per_file_view_window_char_limit")
    op.drop_column("agent", "max_files_open")

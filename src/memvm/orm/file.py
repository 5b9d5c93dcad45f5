"""Files of folders, their chunks (the unit of search), and each agent's view of them."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    DateTime,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy import text as sql  # `text` is also a column name below
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key
from memvm.orm.vector_index import hnsw_indexes
from memvm.orm.vector_type import Float4Vector

PROCESSING_STATUSES = ("pending", "parsing", "embedding", "completed", "error")
# Chunks worth a vector that do not have one yet.
CHUNK_EMBEDDING_QUEUE_PREDICATE = "embedding IS NULL AND embed_attempts < 5"


class FolderFile(TenantOwned, Timestamps, Base):
    """An uploaded file. `raw` holds the upload until the worker has parsed it; `content` is the
    parsed text, whose lines are the lines every window, grep hit and search result refers to.
    `claimed_at` marks a parse in progress; a claim older than the worker's timeout is taken over,
    so a worker killed mid-file never leaves it `parsing` for good."""

    __tablename__ = "folder_file"
    __table_args__ = (
        UniqueConstraint("organization_id", "folder_id", "file_name"),
        tenant_foreign_key("folder_id", "folder", ondelete="CASCADE"),
        CheckConstraint(
            "processing_status IN (" + ", ".join(f"'{status}'" for status in PROCESSING_STATUSES) + ")",
            name="processing_status",
        ),
        Index("ix_folder_file_parse_queue", "created_at", postgresql_where=sql("processing_status = 'parsing'")),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    folder_id: Mapped[str] = mapped_column(String, index=True)
    # What agents see and name in tools: "<folder name>/<file name>", unique in its folder.
    file_name: Mapped[str] = mapped_column(Text)
    original_file_name: Mapped[str] = mapped_column(Text)
    file_type: Mapped[str] = mapped_column(String)  # media type
    file_size: Mapped[int] = mapped_column(BigInteger)
    raw: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    content: Mapped[str | None] = mapped_column(Text, deferred=True)
    line_count: Mapped[int | None] = mapped_column(Integer)
    processing_status: Mapped[str] = mapped_column(String)
    error_message: Mapped[str | None] = mapped_column(Text)
    total_chunks: Mapped[int | None] = mapped_column(Integer)
    chunks_embedded: Mapped[int | None] = mapped_column(Integer)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=sql("0"))


class FileChunk(TenantOwned, Base):
    """A run of whole lines of a file, numbered as in the file; searched by full text and by vector."""

    __tablename__ = "file_chunk"
    __table_args__ = (
        UniqueConstraint("organization_id", "file_id", "seq"),
        tenant_foreign_key("file_id", "folder_file", ondelete="CASCADE"),
        tenant_foreign_key("folder_id", "folder", ondelete="CASCADE"),
        Index("ix_file_chunk_folder_id_fts", "folder_id", "fts", postgresql_using="gin"),  # btree_gin
        Index("ix_file_chunk_embedding_queue", "organization_id", "id", postgresql_where=sql(CHUNK_EMBEDDING_QUEUE_PREDICATE)),
        *hnsw_indexes("file_chunk"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    file_id: Mapped[str] = mapped_column(String)
    folder_id: Mapped[str] = mapped_column(String)
    seq: Mapped[int] = mapped_column(Integer)
    start_line: Mapped[int] = mapped_column(Integer)
    end_line: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    fts: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('english', text)", persisted=True), deferred=True)
    # Filled by the embedding queue with the folder's model.
    embedding: Mapped[list[float] | None] = mapped_column(Float4Vector(), deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(String)
    embedding_dim: Mapped[int | None] = mapped_column(Integer)
    embed_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embed_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=sql("0"))


class AgentFile(TenantOwned, Base):
    """A file of one of the agent's folders as the agent sees it: open or closed, and if open, the
    lines in view. `visible_content` is the rendered window, so compiling a prompt never reads a
    whole file."""

    __tablename__ = "agent_file"
    __table_args__ = (
        UniqueConstraint("organization_id", "agent_id", "file_id"),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("file_id", "folder_file", ondelete="CASCADE"),
        tenant_foreign_key("folder_id", "folder", ondelete="CASCADE"),
        Index("ix_agent_file_agent_id_open", "agent_id", "is_open", "last_accessed_at"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    agent_id: Mapped[str] = mapped_column(String)
    file_id: Mapped[str] = mapped_column(String, index=True)
    folder_id: Mapped[str] = mapped_column(String)
    is_open: Mapped[bool] = mapped_column(Boolean, default=False)
    start_line: Mapped[int | None] = mapped_column(Integer)
    end_line: Mapped[int | None] = mapped_column(Integer)
    visible_content: Mapped[str | None] = mapped_column(Text)
    last_accessed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())

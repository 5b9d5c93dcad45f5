"""Archival memory: archives (shareable between agents) and their passages."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Computed, DateTime, Identity, Index, Integer, String, Text, func
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key
from memvm.orm.vector_index import hnsw_indexes
from memvm.orm.vector_type import Float4Vector


class Archive(TenantOwned, Timestamps, Base):
    """A group of passages. All its passages use one embedding model, fixed at creation."""

    __tablename__ = "archive"

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    embedding_model: Mapped[str] = mapped_column(String)
    embedding_dim: Mapped[int] = mapped_column(Integer)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    # Kept by every insert and delete of its passages (archives/repository.py), so a prompt's
    # <memory_metadata> reads one row per archive instead of counting every passage.
    passage_count: Mapped[int] = mapped_column(Integer, server_default="0")


class AgentArchive(TenantOwned, Base):
    __tablename__ = "agent_archive"
    __table_args__ = (
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("archive_id", "archive", ondelete="CASCADE"),
    )

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    archive_id: Mapped[str] = mapped_column(String, primary_key=True, index=True)
    position: Mapped[int] = mapped_column(BigInteger, Identity())


class Passage(TenantOwned, Base):
    __tablename__ = "passage"
    __table_args__ = (
        Index("ix_passage_archive_id_created_at", "archive_id", "created_at"),
        Index("ix_passage_tags", "tags", postgresql_using="gin"),
        Index("ix_passage_archive_id_fts", "archive_id", "fts", postgresql_using="gin"),  # btree_gin
        *hnsw_indexes("passage"),
        tenant_foreign_key("archive_id", "archive", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    archive_id: Mapped[str] = mapped_column(String)
    text: Mapped[str] = mapped_column(Text)
    # Full-text document, kept by PostgreSQL itself.
    fts: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('english', text)", persisted=True), deferred=True)
    # Deferred: results never need the vector, and parsing 384 floats per row is not free.
    embedding: Mapped[list[float]] = mapped_column(Float4Vector(), deferred=True)
    embedding_model: Mapped[str] = mapped_column(String)
    embedding_dim: Mapped[int] = mapped_column(Integer)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    # Provenance: who wrote it (an agent's step, or an API caller), and from which message.
    writer_type: Mapped[str] = mapped_column(String)
    writer_id: Mapped[str | None] = mapped_column(String)
    step_id: Mapped[str | None] = mapped_column(String)
    source_message_id: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())


class ArchiveTag(TenantOwned, Base):
    """How many of an archive's passages carry a tag, kept with the passages (archives/repository.py):
    the prompt lists an agent's first tags from this index instead of unnesting every passage's."""

    __tablename__ = "archive_tag"
    __table_args__ = (tenant_foreign_key("archive_id", "archive", ondelete="CASCADE"),)

    archive_id: Mapped[str] = mapped_column(String, primary_key=True)
    tag: Mapped[str] = mapped_column(Text, primary_key=True)
    passages: Mapped[int] = mapped_column(Integer)

"""Conversation history."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Computed,
    DateTime,
    Index,
    Integer,
    ScalarSelect,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, tenant_foreign_key
from memvm.db.direct import equals
from memvm.orm.vector_index import hnsw_indexes
from memvm.orm.vector_type import Float4Vector

# Messages worth a vector that do not have one yet.
EMBEDDING_QUEUE_PREDICATE = "embedding IS NULL AND kind = 'message' AND coalesce(content, '') <> '' AND embed_attempts < 5"


class Message(TenantOwned, Base):
    """One stored chat message. `in_context` marks the agent's current window; messages leave it
    (compaction, reset) but are never deleted, so they stay searchable as recall memory."""

    __tablename__ = "message"
    __table_args__ = (
        # Recency across conversations and agents: a message's time, then its place in its conversation.
        Index("ix_message_agent_id_created_at", "agent_id", "created_at", "seq"),
        Index("ix_message_organization_id_created_at", "organization_id", "created_at", "seq", "id"),
        Index("ix_message_in_context", "agent_id", "conversation_id", "seq", postgresql_where=text("in_context")),
        Index("ix_message_conversation_id_seq", "conversation_id", "seq", postgresql_where=text("conversation_id IS NOT NULL")),
        # A client's otid identifies its input message: a retried send finds the first one.
        Index(
            "uq_message_organization_id_agent_id_otid",
            "organization_id",
            "agent_id",
            "otid",
            unique=True,
            postgresql_where=text("otid IS NOT NULL"),
        ),
        Index("ix_message_agent_id_fts", "agent_id", "fts", postgresql_using="gin"),  # btree_gin
        Index("ix_message_embedding_queue", "organization_id", "created_at", postgresql_where=text(EMBEDDING_QUEUE_PREDICATE)),
        *hnsw_indexes("message"),
        # Unique within a conversation; the default one (conversation_id NULL) included.
        UniqueConstraint("organization_id", "agent_id", "conversation_id", "seq", postgresql_nulls_not_distinct=True),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("conversation_id", "conversation", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    # The message's place in its conversation (1, 2, ...), given by the statement that stores it:
    # one more than the conversation's last, which the conversation's turn lock keeps from racing.
    # No counter is shared between conversations (docs/scale-out.md).
    seq: Mapped[int] = mapped_column(BigInteger)
    agent_id: Mapped[str] = mapped_column(String)
    # None: the agent's default conversation.
    conversation_id: Mapped[str | None] = mapped_column(String)
    run_id: Mapped[str | None] = mapped_column(String, index=True)
    step_id: Mapped[str | None] = mapped_column(String)
    role: Mapped[str] = mapped_column(String)  # user | assistant | tool
    kind: Mapped[str] = mapped_column(String, default="message")  # message | heartbeat | summary
    content: Mapped[str | None] = mapped_column(Text)
    reasoning: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB(none_as_null=True))
    tool_call_id: Mapped[str | None] = mapped_column(String)
    tool_name: Mapped[str | None] = mapped_column(String)
    tool_status: Mapped[str | None] = mapped_column(String)  # success | error
    tool_stdout: Mapped[str | None] = mapped_column(Text)  # what a sandboxed call printed
    tool_stderr: Mapped[str | None] = mapped_column(Text)
    otid: Mapped[str | None] = mapped_column(String)
    sender_id: Mapped[str | None] = mapped_column(String)
    in_context: Mapped[bool] = mapped_column(Boolean, default=True)
    # Full-text document, kept by PostgreSQL itself.
    fts: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', coalesce(content, ''))", persisted=True), deferred=True
    )
    # Filled after commit by the embedding queue; claimed_at marks a batch being embedded.
    embedding: Mapped[list[float] | None] = mapped_column(Float4Vector(), deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(String)
    embedding_dim: Mapped[int | None] = mapped_column(Integer)
    embed_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embed_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())


def last_seq(
    organization_id: ColumnElement[str], agent_id: ColumnElement[str], conversation_id: ColumnElement[Any]
) -> ScalarSelect[int]:
    """The conversation's last seq, 0 before its first message: what a message stored next follows.
    `conversation_id` is SQL NULL for the agent's default conversation (direct.equals: each form keeps
    the unique key's index)."""
    prior = Message.__table__.alias("prior")
    where = (
        prior.c.organization_id == organization_id,
        prior.c.agent_id == agent_id,
        equals(prior.c.conversation_id, conversation_id),
    )
    return select(func.coalesce(func.max(prior.c.seq), 0)).where(*where).scalar_subquery()

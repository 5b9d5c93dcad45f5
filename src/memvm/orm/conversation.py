"""Conversations: threads of one agent, each with its own history and context window, over the
agent's shared memory. The agent's original history is its default conversation: its messages and
runs have no conversation (conversation_id NULL), so nothing moved when conversations came."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import InstrumentedAttribute, Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key
from memvm.threads import ANY_CONVERSATION


def in_conversation(column: InstrumentedAttribute[str | None], conversation_id: str | None) -> ColumnElement[bool]:
    """Rows (messages, runs) of one conversation, by their `conversation_id` column: None is the
    agent's default conversation, ANY_CONVERSATION every conversation (threads.py)."""
    if conversation_id == ANY_CONVERSATION:
        return true()
    return column.is_(None) if conversation_id is None else column == conversation_id


class Conversation(TenantOwned, Timestamps, Base):
    __tablename__ = "conversation"
    __table_args__ = (
        Index("ix_conversation_agent_id_created_at_id", "agent_id", "created_at", "id"),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    agent_id: Mapped[str] = mapped_column(String)
    summary: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    # Overrides of the agent's model for this conversation's turns.
    model: Mapped[str | None] = mapped_column(Text)
    model_settings: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    context_window_limit: Mapped[int | None] = mapped_column(Integer)
    hidden: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # set: read-only
    # The tool calls this conversation's last turn stopped on (the agent's own for the default one).
    pending_approval: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    last_message_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # the last send
    last_run_completion: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_by_id: Mapped[str | None] = mapped_column(String)
    last_updated_by_id: Mapped[str | None] = mapped_column(String)


class ConversationBlock(TenantOwned, Base):
    """A block isolated in one conversation: a copy of the agent's block of that label, shown and
    edited there instead of the shared one."""

    __tablename__ = "conversation_block"
    __table_args__ = (
        UniqueConstraint("organization_id", "block_id"),
        tenant_foreign_key("conversation_id", "conversation", ondelete="CASCADE"),
        tenant_foreign_key(
            ["block_id", "label"],
            "block",
            ["id", "label"],
            name="fk_conversation_block_block",
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
    )

    conversation_id: Mapped[str] = mapped_column(String, primary_key=True)
    label: Mapped[str] = mapped_column(Text, primary_key=True)
    block_id: Mapped[str] = mapped_column(String)

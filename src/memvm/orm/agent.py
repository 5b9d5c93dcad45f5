"""Agents and their block attachments."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Identity, Index, Integer, String, Text, UniqueConstraint, func, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column, query_expression

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key


class Agent(TenantOwned, Timestamps, Base):
    __tablename__ = "agent"
    __table_args__ = (
        Index("ix_agent_tags", "tags", postgresql_using="gin"),
        Index("ix_agent_organization_id_created_at_id", "organization_id", "created_at", "id"),
        # Only the archive column: organization_id is part of the agent's key.
        tenant_foreign_key("default_archive_id", "archive", ondelete="SET NULL (default_archive_id)"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    agent_type: Mapped[str] = mapped_column(String)
    system: Mapped[str] = mapped_column(Text)  # the template; memory is compiled into `compiled_system`
    memory_render_mode: Mapped[str] = mapped_column(String)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    model: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[str | None] = mapped_column(Text)
    llm_config: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    embedding_config: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    context_window_limit: Mapped[int | None] = mapped_column(Integer)
    timezone: Mapped[str] = mapped_column(String)
    # Variables passed to this agent's custom tools (the SDK's `secrets`); never returned in clear.
    tool_secrets: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    # Letta's tool rules as the SDK sends them (agents/tool_rules.py); the loop enforces them.
    tool_rules: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    # Letta's message_buffer_autoclear: a finished turn leaves nothing of the conversation in the context
    # window (runtime/loop/autoclear.py); the messages stay stored and searchable.
    message_buffer_autoclear: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # The tool calls a turn stopped on (requires_approval) until the client answers; None: nothing waits.
    pending_approval: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    # Letta's file view settings; None: derived from the model's context window (files/limits).
    max_files_open: Mapped[int | None] = mapped_column(Integer)
    per_file_view_window_char_limit: Mapped[int | None] = mapped_column(Integer)
    compiled_system: Mapped[str] = mapped_column(Text, default="")
    default_archive_id: Mapped[str | None] = mapped_column(String)
    system_compiled_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # Not columns: whether the agent has folders, identities and runs, filled only by the listings that
    # ask for them (agents/repository.py), so the agents' views skip the relations they have none of.
    has_folders: Mapped[bool | None] = query_expression()
    has_identities: Mapped[bool | None] = query_expression()
    has_runs: Mapped[bool | None] = query_expression()


class AgentBlock(TenantOwned, Base):
    """A block attached to an agent. `label` mirrors the block's label (kept in step by the
    composite FK's ON UPDATE CASCADE) so the database enforces one label per agent."""

    __tablename__ = "agent_block"
    __table_args__ = (
        UniqueConstraint("organization_id", "agent_id", "label", name="uq_agent_block_agent_id_label"),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key(
            ["block_id", "label"], "block", ["id", "label"], name="fk_agent_block_block", ondelete="CASCADE", onupdate="CASCADE"
        ),
    )

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    block_id: Mapped[str] = mapped_column(String, primary_key=True, index=True)
    label: Mapped[str] = mapped_column(Text)
    # Attachment order: blocks render in the order they were attached.
    position: Mapped[int] = mapped_column(BigInteger, Identity())

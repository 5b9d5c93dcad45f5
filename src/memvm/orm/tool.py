"""Tools known to the server and the tools attached to each agent."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Computed, DateTime, ForeignKey, Identity, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, SharedOrTenantOwned, TenantOwned, Timestamps, tenant_foreign_key
from memvm.orm.vector_index import hnsw_indexes
from memvm.orm.vector_type import Float4Vector

# Tools whose search text has no vector yet (a new tool, or one whose text changed).
EMBEDDING_QUEUE_PREDICATE = "embedding IS NULL AND embed_attempts < 5"


class Tool(SharedOrTenantOwned, Timestamps, Base):
    """Built-in tools have no organization: every organization shares them read-only. Custom tools
    (tool_type "custom") belong to one organization and carry their Python source; an MCP server's
    tools (tool_type "external_mcp") belong to its organization and run on the server."""

    __tablename__ = "tool"
    __table_args__ = (
        # Names are unique among the built-ins, and within each organization.
        Index("uq_tool_builtin_name", "name", unique=True, postgresql_where=text("organization_id IS NULL")),
        Index(
            "uq_tool_organization_id_name",
            "organization_id",
            "name",
            unique=True,
            postgresql_where=text("organization_id IS NOT NULL"),
        ),
        Index("ix_tool_fts", "fts", postgresql_using="gin"),
        Index("ix_tool_embedding_queue", "updated_at", postgresql_where=text(EMBEDDING_QUEUE_PREDICATE)),
        *hnsw_indexes("tool"),
        # Both are reference tables under Citus; the key also keeps a server's tools in its organization.
        tenant_foreign_key("mcp_server_id", "mcp_server", ondelete="CASCADE"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String)
    tool_type: Mapped[str] = mapped_column(String)
    description: Mapped[str] = mapped_column(Text)
    json_schema: Mapped[dict[str, Any]] = mapped_column(JSONB)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    source_code: Mapped[str | None] = mapped_column(Text)
    source_type: Mapped[str | None] = mapped_column(String)
    args_json_schema: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    return_char_limit: Mapped[int] = mapped_column(Integer, server_default=text("50000"))
    pip_requirements: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    default_requires_approval: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    enable_parallel_execution: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default=text("'{}'::jsonb"))
    # An MCP server's tool (tool_type "external_mcp") goes with its server.
    mcp_server_id: Mapped[str | None] = mapped_column(String, index=True)
    # What search reads and embeds of the tool (tools/searchable.py); the full text adds the source.
    search_text: Mapped[str] = mapped_column(Text, server_default=text("''"))
    fts: Mapped[Any] = mapped_column(
        TSVECTOR,
        Computed(
            "setweight(to_tsvector('english', name), 'A') || setweight(to_tsvector('english', search_text), 'B')"
            " || setweight(to_tsvector('english', coalesce(source_code, '')), 'D')",
            persisted=True,
        ),
        deferred=True,
    )
    # Filled after commit by the embedding queue, and emptied when search_text changes.
    embedding: Mapped[list[float] | None] = mapped_column(Float4Vector(), deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(String)
    embedding_dim: Mapped[int | None] = mapped_column(Integer)
    embed_claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    embed_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))


class AgentTool(TenantOwned, Base):
    __tablename__ = "agent_tool"
    __table_args__ = (tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),)

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    tool_id: Mapped[str] = mapped_column(ForeignKey("tool.id", ondelete="CASCADE"), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(BigInteger, Identity())

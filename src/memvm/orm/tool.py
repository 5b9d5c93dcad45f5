"""Tools known to the server and the tools attached to each agent."""

from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Identity, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, SharedOrTenantOwned, TenantOwned, Timestamps


class Tool(SharedOrTenantOwned, Timestamps, Base):
    """Built-in tools have no organization: every organization shares them read-only. Custom tools
    (tool_type "custom") belong to one organization and carry their Python source."""

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


class AgentTool(TenantOwned, Base):
    __tablename__ = "agent_tool"

    agent_id: Mapped[str] = mapped_column(ForeignKey("agent.id", ondelete="CASCADE"), primary_key=True)
    tool_id: Mapped[str] = mapped_column(ForeignKey("tool.id", ondelete="CASCADE"), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(BigInteger, Identity())

"""Tools known to the server and the tools attached to each agent."""

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Identity, String, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, SharedOrTenantOwned, TenantOwned, Timestamps


class Tool(SharedOrTenantOwned, Timestamps, Base):
    """Built-in tools have no organization: every organization shares them read-only."""

    __tablename__ = "tool"

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String, unique=True)
    tool_type: Mapped[str] = mapped_column(String)
    description: Mapped[str] = mapped_column(Text)
    json_schema: Mapped[dict[str, Any]] = mapped_column(JSONB)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)


class AgentTool(TenantOwned, Base):
    __tablename__ = "agent_tool"

    agent_id: Mapped[str] = mapped_column(ForeignKey("agent.id", ondelete="CASCADE"), primary_key=True)
    tool_id: Mapped[str] = mapped_column(ForeignKey("tool.id", ondelete="CASCADE"), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(BigInteger, Identity())

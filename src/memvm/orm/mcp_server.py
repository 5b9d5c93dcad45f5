"""MCP servers: an organization's tool sources. Their tools are rows of `tool` (tool_type
"external_mcp") that point back here and go with the server."""

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, DateTime, String, Text, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps

SERVER_TYPES = ("stdio", "sse", "streamable_http")
STATUSES = ("unknown", "connected", "error")


class McpServer(TenantOwned, Timestamps, Base):
    __tablename__ = "mcp_server"
    __table_args__ = (
        UniqueConstraint("organization_id", "server_name"),
        CheckConstraint(f"server_type IN {SERVER_TYPES}", name="server_type"),
        CheckConstraint(f"status IN {STATUSES}", name="status"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    server_name: Mapped[str] = mapped_column(Text)
    server_type: Mapped[str] = mapped_column(String)
    command: Mapped[str | None] = mapped_column(Text)  # stdio
    args: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    network: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))  # stdio: the jail keeps the network
    server_url: Mapped[str | None] = mapped_column(Text)  # sse, streamable_http
    auth_header: Mapped[str | None] = mapped_column(Text)
    # {"env": {...}, "auth_token": "...", "custom_headers": {...}}: used to connect, never answered or logged.
    secrets: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    # The last connect, list or call: what GET /v1/mcp-servers/{id} says of the server's health.
    status: Mapped[str] = mapped_column(String, server_default=text("'unknown'"))
    last_error: Mapped[str | None] = mapped_column(Text)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

"""Identities: the organization's own users, organizations or other parties its agents and blocks
belong to, known by the caller's key for them (`identifier_key`)."""

from typing import Any

from sqlalchemy import CheckConstraint, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key

IDENTITY_TYPES = ("org", "user", "other")


class Identity(TenantOwned, Timestamps, Base):
    __tablename__ = "identity"
    __table_args__ = (
        UniqueConstraint("organization_id", "identifier_key"),
        CheckConstraint(f"identity_type IN {IDENTITY_TYPES}", name="identity_type"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    identifier_key: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    identity_type: Mapped[str] = mapped_column(String)
    project_id: Mapped[str | None] = mapped_column(String)
    properties: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)


class IdentityAgent(TenantOwned, Base):
    __tablename__ = "identity_agent"
    __table_args__ = (
        tenant_foreign_key("identity_id", "identity", ondelete="CASCADE"),
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
    )

    identity_id: Mapped[str] = mapped_column(String, primary_key=True)
    agent_id: Mapped[str] = mapped_column(String, primary_key=True, index=True)


class IdentityBlock(TenantOwned, Base):
    __tablename__ = "identity_block"
    __table_args__ = (
        tenant_foreign_key("identity_id", "identity", ondelete="CASCADE"),
        tenant_foreign_key("block_id", "block", ondelete="CASCADE"),
    )

    identity_id: Mapped[str] = mapped_column(String, primary_key=True)
    block_id: Mapped[str] = mapped_column(String, primary_key=True, index=True)

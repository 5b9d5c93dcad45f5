"""Identities: the organization's own users, organizations or other parties its agents and blocks
belong to, known by the caller's key for them (`identifier_key`)."""

from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps

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

    identity_id: Mapped[str] = mapped_column(ForeignKey("identity.id", ondelete="CASCADE"), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agent.id", ondelete="CASCADE"), primary_key=True, index=True)


class IdentityBlock(TenantOwned, Base):
    __tablename__ = "identity_block"

    identity_id: Mapped[str] = mapped_column(ForeignKey("identity.id", ondelete="CASCADE"), primary_key=True)
    block_id: Mapped[str] = mapped_column(ForeignKey("block.id", ondelete="CASCADE"), primary_key=True, index=True)

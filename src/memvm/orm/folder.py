"""Folders (Letta's sources): named groups of files an agent can be given. Files come in a later migration."""

from typing import Any

from sqlalchemy import BigInteger, Identity, Integer, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps, tenant_foreign_key


class Folder(TenantOwned, Timestamps, Base):
    """Its embedding model is fixed at creation, as an archive's: every chunk of its files will use it."""

    __tablename__ = "folder"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    instructions: Mapped[str | None] = mapped_column(Text)
    embedding_model: Mapped[str] = mapped_column(String)
    embedding_dim: Mapped[int] = mapped_column(Integer)
    chunk_size: Mapped[int] = mapped_column(Integer)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)


class AgentFolder(TenantOwned, Base):
    __tablename__ = "agent_folder"
    __table_args__ = (
        tenant_foreign_key("agent_id", "agent", ondelete="CASCADE"),
        tenant_foreign_key("folder_id", "folder", ondelete="CASCADE"),
    )

    agent_id: Mapped[str] = mapped_column(String, primary_key=True)
    folder_id: Mapped[str] = mapped_column(String, primary_key=True, index=True)
    position: Mapped[int] = mapped_column(BigInteger, Identity())

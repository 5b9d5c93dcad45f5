"""Core-memory blocks and their change history."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvm.db.base import Base, TenantOwned, Timestamps


class Block(TenantOwned, Timestamps, Base):
    __tablename__ = "block"
    __table_args__ = (
        # The database itself refuses a value over its limit, whatever the write path.
        CheckConstraint("char_length(value) <= char_limit", name="value_within_limit"),
        CheckConstraint("char_limit > 0", name="limit_positive"),
        CheckConstraint("label <> ''", name="label_not_empty"),
        # Target of agent_block's composite FK, so a relabel cascades to every attachment.
        UniqueConstraint("organization_id", "id", "label", name="uq_block_id_label"),
        Index("ix_block_organization_id_created_at_id", "organization_id", "created_at", "id"),
        Index("ix_block_label", "label"),
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    label: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text, default="")
    char_limit: Mapped[int] = mapped_column("char_limit", Integer)
    description: Mapped[str | None] = mapped_column(Text)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    hidden: Mapped[bool | None] = mapped_column(Boolean)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    version: Mapped[int] = mapped_column(Integer, default=1)


class BlockChange(TenantOwned, Base):
    """One row per block write: the state after the change, and who made it.

    No foreign key to `block`, so the history of a deleted block survives its deletion.
    """

    __tablename__ = "block_change"
    __table_args__ = (Index("ix_block_change_block_id_version", "block_id", "version"),)

    block_id: Mapped[str] = mapped_column(String, primary_key=True)  # the key's index serves a block's lookups
    # The change's number among its block's changes (1, 2, ...), one more than the block's last, given
    # by the statement that stores it, under the block's lock: no counter is shared between blocks
    # (docs/scale-out.md). A delete's row shares its version with the write before it; this orders them.
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(Integer)
    change: Mapped[str] = mapped_column(String)  # create | update | undo | redo | restore | delete
    actor_type: Mapped[str] = mapped_column(String)  # api | agent
    actor_id: Mapped[str | None] = mapped_column(String)
    step_id: Mapped[str | None] = mapped_column(String)
    run_id: Mapped[str | None] = mapped_column(String)
    tool_call_id: Mapped[str | None] = mapped_column(String)
    restored_version: Mapped[int | None] = mapped_column(Integer)  # undo | redo | restore: the version brought back
    label: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text)
    char_limit: Mapped[int] = mapped_column(Integer)
    description: Mapped[str | None] = mapped_column(Text)
    read_only: Mapped[bool] = mapped_column(Boolean)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())

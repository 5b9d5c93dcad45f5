"""Block shapes of the Letta v1 API (CreateBlock, BlockUpdate, BlockResponse)."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memvm.memory.rules import DEFAULT_BLOCK_LIMIT, MAX_BLOCK_LIMIT, MAX_VERSION
from memvm.orm import BlockChange


class BlockCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    label: str = Field(description="Name of the block; unique among an agent's blocks (e.g. 'human').")
    value: str | None = Field("", description="Text of the block; None is stored as empty.")
    limit: int = Field(DEFAULT_BLOCK_LIMIT, ge=1, le=MAX_BLOCK_LIMIT, description="Maximum length of value in characters.")
    description: str | None = None
    read_only: bool = Field(False, description="Binds the agent's tools only; REST may still edit.")
    hidden: bool | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class BlockUpdate(BaseModel):
    """Every field optional; fields that are absent or null stay unchanged."""

    model_config = ConfigDict(extra="ignore")

    label: str | None = None
    value: str | None = None
    limit: int | None = Field(None, ge=1, le=MAX_BLOCK_LIMIT)
    description: str | None = None
    read_only: bool | None = None
    hidden: bool | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, exclude_none=True)


class BlockRead(BaseModel):
    id: str
    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    hidden: bool | None
    metadata: dict[str, Any]
    tags: list[str]
    version: int = Field(description="Increases on every change; send it back in If-Match to avoid lost updates.")
    created_at: datetime
    updated_at: datetime
    is_template: bool = False
    preserve_on_migration: bool = False
    project_id: str | None = None
    template_name: str | None = None

    @classmethod
    def of(cls, block: Any) -> "BlockRead":
        return cls(
            id=block.id,
            label=block.label,
            value=block.value,
            limit=block.char_limit,
            description=block.description,
            read_only=block.read_only,
            hidden=block.hidden,
            metadata=block.metadata_,
            tags=block.tags,
            version=block.version,
            created_at=block.created_at,
            updated_at=block.updated_at,
        )


class HistoryActor(BaseModel):
    """Who made a change: an API key (`id` is the key's) or the local/admin caller, or an agent (`id`
    is the agent's) in a run's step, through one tool call."""

    type: str
    id: str | None
    organization_id: str
    run_id: str | None = None
    step_id: str | None = None
    tool_call_id: str | None = None


class BlockHistoryEntry(BaseModel):
    version: int
    change: str = Field(description="create | update | undo | redo | restore | delete")
    created_at: datetime
    changed_fields: list[str] = Field(description="API field names; every field for a create.")
    old: dict[str, Any] | None = Field(description="The changed fields before (null for a create).")
    new: dict[str, Any] = Field(description="The changed fields after (for a delete: the last state).")
    diff: str | None = Field(None, description="format=diff: the value's unified diff (old/new then omit value).")
    restored_version: int | None = Field(None, description="undo, redo, restore: the version brought back.")
    actor: HistoryActor


class BlockVersionRead(BaseModel):
    """The block as it was at one version."""

    block_id: str
    version: int
    change: str
    label: str
    value: str
    limit: int
    description: str | None
    read_only: bool
    metadata: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, row: BlockChange) -> "BlockVersionRead":
        return cls(
            block_id=row.block_id,
            version=row.version,
            change=row.change,
            label=row.label,
            value=row.value,
            limit=row.char_limit,
            description=row.description,
            read_only=row.read_only,
            metadata=row.metadata_,
            created_at=row.created_at,
        )


class HistoryPage(BaseModel):
    """One page of a block's history, newest first: `before`/`after` are versions bounding it."""

    limit: int
    before: int | None
    after: int | None
    as_diff: bool  # the value as a unified diff instead of old and new


class RestoreRequest(BaseModel):
    version: int = Field(ge=1, le=MAX_VERSION, description="The version whose content comes back.")

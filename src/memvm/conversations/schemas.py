"""Conversation shapes of the Letta v1 API (CreateConversation, UpdateConversation, Conversation)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvm.orm import Conversation

MAX_CONTEXT_WINDOW_LIMIT = 2_147_483_647  # a 32-bit integer column
ArchiveStatus = Literal["unarchived", "archived", "all"]
ConversationOrder = Literal["created_at", "last_run_completion", "last_message_at"]


def _check_handle(value: str | None) -> str | None:
    if value is not None and (value.count("/") < 1 or not all(value.split("/", 1))):
        raise ValueError(f"{value!r} is not a model handle; use provider/model-name, e.g. 'openai/gpt-4o-mini'")
    return value


class _Overrides(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str | None = Field(None, max_length=10_000)
    description: str | None = Field(None, max_length=10_000)
    model: str | None = Field(None, max_length=300, description="provider/model-name; overrides the agent's model here")
    model_settings: dict[str, Any] | None = None
    context_window_limit: int | None = Field(None, ge=256, le=MAX_CONTEXT_WINDOW_LIMIT)

    _handle = field_validator("model")(_check_handle)


class ConversationCreate(_Overrides):
    hidden: bool = False
    isolated_block_labels: list[str] | None = Field(
        None, max_length=100, description="Labels of the agent's blocks to copy for this conversation alone."
    )


class ConversationUpdate(_Overrides):
    archived: bool | None = None
    last_message_at: datetime | None = None


class ConversationRead(BaseModel):
    id: str
    agent_id: str
    summary: str | None
    description: str | None
    model: str | None
    model_settings: dict[str, Any] | None
    context_window_limit: int | None
    archived: bool
    archived_at: datetime | None
    hidden: bool
    isolated_block_ids: list[str]
    in_context_message_ids: list[str] | None = None  # filled where the window was read
    last_message_at: datetime | None
    last_run_completion: datetime | None
    created_at: datetime
    updated_at: datetime
    created_by_id: str | None
    last_updated_by_id: str | None

    @classmethod
    def of(cls, row: Conversation, isolated_block_ids: list[str], in_context: list[str] | None = None) -> "ConversationRead":
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            summary=row.summary,
            description=row.description,
            model=row.model,
            model_settings=row.model_settings,
            context_window_limit=row.context_window_limit,
            archived=row.archived_at is not None,
            archived_at=row.archived_at,
            hidden=row.hidden,
            isolated_block_ids=isolated_block_ids,
            in_context_message_ids=in_context,
            last_message_at=row.last_message_at,
            last_run_completion=row.last_run_completion,
            created_at=row.created_at,
            updated_at=row.updated_at,
            created_by_id=row.created_by_id,
            last_updated_by_id=row.last_updated_by_id,
        )


class CompactionResult(BaseModel):
    summary: str
    num_messages_before: int
    num_messages_after: int

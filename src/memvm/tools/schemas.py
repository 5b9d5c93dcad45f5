"""Tool shapes of the Letta v1 API."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel

RETURN_CHAR_LIMIT = 50_000


class ToolRead(BaseModel):
    id: str
    name: str
    tool_type: str
    description: str
    tags: list[str]
    json_schema: dict[str, Any]
    source_code: str | None = None
    return_char_limit: int = RETURN_CHAR_LIMIT
    default_requires_approval: bool = False
    enable_parallel_execution: bool = False
    metadata: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, tool: Any) -> "ToolRead":
        return cls(
            id=tool.id,
            name=tool.name,
            tool_type=tool.tool_type,
            description=tool.description,
            tags=tool.tags,
            json_schema=tool.json_schema,
            created_at=tool.created_at,
            updated_at=tool.updated_at,
        )

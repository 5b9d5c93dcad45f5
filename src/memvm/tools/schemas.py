"""Tool shapes of the Letta v1 API (ToolCreate, ToolUpdate, Tool)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from sqlalchemy import Row

from memvm.orm import Tool

RETURN_CHAR_LIMIT = 50_000
MAX_SOURCE_CHARS = 100_000


class PipRequirement(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z0-9.*+!_-]+$", description="Pinned with ==.")


class ToolFields(BaseModel):
    """What create, upsert and update share; all optional here."""

    model_config = ConfigDict(extra="ignore")

    description: str | None = Field(None, description="Default: the function's docstring.")
    json_schema: dict[str, Any] | None = Field(None, description="Default: derived from the signature and docstring.")
    args_json_schema: dict[str, Any] | None = None
    return_char_limit: int | None = Field(None, ge=1, le=1_000_000)
    tags: list[str] | None = None
    pip_requirements: list[PipRequirement] | None = None
    default_requires_approval: bool | None = None
    enable_parallel_execution: bool | None = None
    source_type: Literal["python"] | None = None
    metadata: dict[str, Any] | None = Field(
        None,
        validation_alias=AliasChoices("metadata", "metadata_"),
        description='{"sandbox": {"network": true}} lets the tool\'s calls reach the network.',
    )


class ToolCreate(ToolFields):
    source_code: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS, description="Python source of one function.")


class ToolUpdate(ToolFields):
    source_code: str | None = Field(None, min_length=1, max_length=MAX_SOURCE_CHARS)


class ToolRead(BaseModel):
    id: str
    name: str
    tool_type: str
    description: str
    tags: list[str]
    json_schema: dict[str, Any]
    args_json_schema: dict[str, Any] | None = None
    source_code: str | None = None
    source_type: str | None = None
    return_char_limit: int = RETURN_CHAR_LIMIT
    pip_requirements: list[dict[str, Any]] = Field(default_factory=list)
    default_requires_approval: bool = False
    enable_parallel_execution: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, tool: "Tool | Row[Any]") -> "ToolRead":
        """From the tool, or a row of its SHOWN attributes (tools/repository.py's agent views)."""
        return cls(
            id=tool.id,
            name=tool.name,
            tool_type=tool.tool_type,
            description=tool.description,
            tags=tool.tags,
            json_schema=tool.json_schema,
            args_json_schema=tool.args_json_schema,
            source_code=tool.source_code,
            source_type=tool.source_type,
            return_char_limit=tool.return_char_limit,
            pip_requirements=tool.pip_requirements,
            default_requires_approval=tool.default_requires_approval,
            enable_parallel_execution=tool.enable_parallel_execution,
            metadata=tool.metadata_,
            created_at=tool.created_at,
            updated_at=tool.updated_at,
        )


# The Tool attributes ToolRead.of reads: what an agent view reads of each of its tools.
SHOWN = (
    "id",
    "name",
    "tool_type",
    "description",
    "tags",
    "json_schema",
    "args_json_schema",
    "source_code",
    "source_type",
    "return_char_limit",
    "pip_requirements",
    "default_requires_approval",
    "enable_parallel_execution",
    "metadata_",
    "created_at",
    "updated_at",
)


class ToolRunRequest(BaseModel):
    """POST /v1/tools/run: try a tool's source with arguments, in the sandbox, without storing it."""

    model_config = ConfigDict(extra="ignore")

    source_code: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS)
    args: dict[str, Any] = Field(default_factory=dict, description="The function's arguments.")
    env_vars: dict[str, str] = Field(default_factory=dict, description="Environment variables for this run.")
    name: str | None = Field(None, description="The function to call; by default the last one defined.")
    pip_requirements: list[PipRequirement] = Field(default_factory=list)
    return_char_limit: int = Field(RETURN_CHAR_LIMIT, ge=1, le=1_000_000)

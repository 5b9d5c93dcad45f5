"""Agent shapes of the Letta v1 API (CreateAgent, UpdateAgent, AgentState)."""

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import Row

from memvm.agents.tool_rules import ToolRule
from memvm.blocks.schemas import BlockCreate, BlockRead
from memvm.files.schemas import FileBlockRead, FolderRead
from memvm.identities.schemas import IdentityRead
from memvm.ids import ids_check
from memvm.llm.types import endpoint_type
from memvm.memory.compiler import RenderMode
from memvm.memory.files_view import MAX_FILES_OPEN_CAP, MAX_VIEW_CHARS_CAP, MIN_VIEW_CHARS
from memvm.orm import Agent, Block, Folder, Tool
from memvm.prompts.service import file_limits_of
from memvm.runs.schemas import LastRun
from memvm.tools.schemas import ToolRead

AgentType = Literal["letta_v1_agent", "memgpt_v2_agent", "memgpt_agent", "react_agent", "workflow_agent", "sleeptime_agent"]
NAME_DESCRIPTION = "Letters, digits, spaces, '_', ''' and '-'; 1-100 characters."


MAX_CONTEXT_WINDOW_LIMIT = 2_147_483_647  # the agent's column is a 32-bit integer


class LLMConfig(BaseModel):
    """Accepted as the Letta sheet describes it; unknown keys are kept."""

    model_config = ConfigDict(extra="allow")

    model: str
    model_endpoint_type: str = "openai"
    model_endpoint: str | None = Field(
        None, pattern=r"^https?://[^\x00-\x20\x7f/?#]+[^\x00-\x20\x7f]*$", description="http(s) URL of the OpenAI-compatible API"
    )
    context_window: int = Field(32_000, ge=256)

    @field_validator("model_endpoint")
    @classmethod
    def _port_and_host_parse(cls, value: str | None) -> str | None:
        # The pattern lets through what only a URL parser catches: an unclosed IPv6 bracket, a port
        # that is not a number or is over 65535. The HTTP client raises those at call time, not as
        # connection errors, so they would fail every turn instead of this request.
        if value is not None:
            try:
                _ = urlsplit(value).port  # reading it parses it
            except ValueError as exc:
                raise ValueError(f"{value!r} is not a valid URL: {exc}") from None
        return value


def _check_timezone(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {value!r}; use an IANA name such as 'UTC' or 'Europe/Berlin'") from None
    return value


_check_block_ids = ids_check("block", "block")
_check_folder_ids = ids_check("source", "folder")
_check_identity_ids = ids_check("identity", "identity")


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MASKED_SECRET = "********"


def _check_secret_names(secrets: dict[str, str] | None) -> dict[str, str] | None:
    for key in secrets or {}:
        if not _ENV_NAME.match(key):
            raise ValueError(
                f"{key!r} is not an environment variable name; use letters, digits and '_', not starting with a digit"
            )
    return secrets


class SecretRead(BaseModel):
    """One of the agent's tool variables; its value is never shown."""

    agent_id: str
    key: str
    value: str = MASKED_SECRET


class AgentFields(BaseModel):
    """Fields shared by create and update; all optional here."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[\w '\-]+$", description=NAME_DESCRIPTION)
    description: str | None = None
    system: str | None = Field(None, description="System prompt; '{CORE_MEMORY}' marks where memory goes, else it is appended.")
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    # Handles are checked by the service: a malformed one is a 400, as Letta answers it.
    model: str | None = Field(None, description="Model handle 'provider/model-name'.")
    embedding: str | None = Field(None, description="Embedding handle 'provider/model-name'.")
    llm_config: LLMConfig | None = None
    embedding_config: dict[str, Any] | None = None
    context_window_limit: int | None = Field(None, ge=256, le=MAX_CONTEXT_WINDOW_LIMIT)
    timezone: str | None = None
    memory_render_mode: RenderMode | None = Field(None, description="standard | line_numbered | git")
    secrets: dict[str, str] | None = Field(
        None,
        validation_alias=AliasChoices("secrets", "tool_exec_environment_variables"),
        description="Environment variables for this agent's custom tools (replaces the set); never shown again.",
    )

    tool_rules: list[ToolRule] | None = Field(None, description="Letta's tool rules (replaces the set).")
    message_buffer_autoclear: bool | None = Field(
        None,
        description="If true, the agent does not keep previous messages in its context window from one turn to the "
        "next (it keeps core memory; the messages stay stored and searchable as recall memory). Default false.",
    )
    max_files_open: int | None = Field(
        None,
        ge=1,
        le=MAX_FILES_OPEN_CAP,
        description="How many files of its folders the agent may have open at once; default by its context window.",
    )
    per_file_view_window_char_limit: int | None = Field(
        None,
        ge=MIN_VIEW_CHARS,
        le=MAX_VIEW_CHARS_CAP,
        description="Characters an open file shows in the prompt; default by the context window.",
    )

    folder_ids: list[str] | None = Field(None, description="Ids of the folders to attach (on update: replaces the set).")
    source_ids: list[str] | None = Field(None, description="Deprecated: use folder_ids (this is read only without it).")
    identity_ids: list[str] | None = Field(None, description="Ids of the identities it belongs to (on update: replaces the set).")

    _timezone = field_validator("timezone")(_check_timezone)
    _secrets = field_validator("secrets")(_check_secret_names)
    _folder_ids = field_validator("folder_ids", "source_ids")(_check_folder_ids)
    _identity_ids = field_validator("identity_ids")(_check_identity_ids)

    @model_validator(mode="before")
    @classmethod
    def _embedding_from_config(cls, data: Any) -> Any:
        """Letta's `embedding_config` is the long form of the `embedding` handle: an OpenAI-compatible
        model becomes 'openai/<model>' (the handle wins when both are given). It is served through the
        endpoint and key this server is configured with, never the config's `embedding_endpoint`: a
        caller must not make the server send its key, or requests, to an address of the caller's
        choosing. Other endpoint types (Letta's hosted 'letta-free', …) keep the local model."""
        if not isinstance(data, dict) or data.get("embedding") is not None:
            return data
        config = data.get("embedding_config")
        if isinstance(config, dict) and config.get("embedding_endpoint_type") == "openai":
            model = config.get("embedding_model")
            if isinstance(model, str) and model.strip():
                return {**data, "embedding": f"openai/{model.strip()}"}
        return data


class AgentCreate(AgentFields):
    agent_type: AgentType = "letta_v1_agent"
    tools: list[str] = Field(default_factory=list, description="Names of tools to attach.")
    tool_ids: list[str] = Field(default_factory=list, description="Ids of tools to attach.")
    include_base_tools: bool = Field(True, description="Attach the default tools of the agent type.")
    memory_blocks: list[BlockCreate] = Field(default_factory=list, description="New blocks to create and attach.")
    block_ids: list[str] = Field(default_factory=list, description="Existing blocks to attach.")

    _block_ids = field_validator("block_ids")(_check_block_ids)

    def chosen_folder_ids(self) -> list[str]:
        """The folders to attach: `folder_ids`, else the deprecated `source_ids` (as Letta reads them)."""
        return self.folder_ids or self.source_ids or []


class AgentUpdate(AgentFields):
    block_ids: list[str] | None = Field(None, description="Replaces the set of attached blocks.")

    _block_ids = field_validator("block_ids")(_check_block_ids)

    def chosen_folder_ids(self) -> list[str] | None:
        """The agent's folders from now on (None: unchanged): `folder_ids` if given, else the
        deprecated `source_ids` (as Letta reads them)."""
        return self.folder_ids if self.folder_ids is not None else self.source_ids


class MemoryRead(BaseModel):
    agent_type: str
    git_enabled: bool
    blocks: list[BlockRead]
    file_blocks: list[FileBlockRead] = Field(default_factory=list)
    prompt_template: str | None = None


class AgentRead(BaseModel):
    id: str
    name: str
    agent_type: str
    description: str | None
    system: str
    tags: list[str]
    metadata: dict[str, Any]
    model: str | None
    embedding: str | None
    llm_config: dict[str, Any] | None
    embedding_config: dict[str, Any] | None
    context_window_limit: int | None
    timezone: str
    memory_render_mode: RenderMode
    memory: MemoryRead
    blocks: list[BlockRead]
    tools: list[ToolRead] = Field(default_factory=list)
    sources: list[FolderRead] = Field(default_factory=list, description="The attached folders (Letta's sources).")
    identities: list[IdentityRead] = Field(default_factory=list, description="The identities it belongs to.")
    identity_ids: list[str] = Field(default_factory=list, description="Deprecated: use identities.")
    tool_rules: list[dict[str, Any]] = Field(default_factory=list)
    message_buffer_autoclear: bool = False
    max_files_open: int
    per_file_view_window_char_limit: int
    message_ids: list[str] = Field(default_factory=list)
    last_run_completion: datetime | None = None
    last_stop_reason: str | None = None
    secrets: list[SecretRead] = Field(default_factory=list)
    tool_exec_environment_variables: list[SecretRead] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(
        cls,
        agent: Agent,
        blocks: list[Block] | None,
        tools: Sequence[Tool | Row[Any]] | None,
        *,
        folders: list[Folder] | None = None,
        identities: list[IdentityRead] | None = None,
        file_blocks: list[FileBlockRead] | None = None,
        show_tags: bool,
        show_secrets: bool,
        last_run: LastRun | None = None,
    ) -> "AgentRead":
        """`blocks`/`tools`/`folders`/`identities` None means the caller did not ask for them (v1 SDK `include` semantics)."""
        block_reads = [BlockRead.of(block) for block in blocks or ()]
        secrets = [SecretRead(agent_id=agent.id, key=key) for key in sorted(agent.tool_secrets)] if show_secrets else []
        limits = file_limits_of(agent)
        return cls(
            id=agent.id,
            name=agent.name,
            agent_type=agent.agent_type,
            description=agent.description,
            system=agent.system,
            tags=agent.tags if show_tags else [],
            metadata=agent.metadata_,
            model=agent.model,
            embedding=agent.embedding,
            llm_config=_llm_config(agent),
            embedding_config=agent.embedding_config,
            context_window_limit=agent.context_window_limit,
            timezone=agent.timezone,
            memory_render_mode=RenderMode(agent.memory_render_mode),
            memory=MemoryRead(
                agent_type=agent.agent_type,
                git_enabled=agent.memory_render_mode == RenderMode.GIT,
                blocks=block_reads,
                file_blocks=file_blocks or [],
                prompt_template=None,
            ),
            blocks=block_reads,
            tools=[ToolRead.of(tool) for tool in tools or ()],
            sources=[FolderRead.of(folder) for folder in folders or ()],
            identities=identities or [],
            identity_ids=[identity.id for identity in identities or ()],
            tool_rules=agent.tool_rules,
            message_buffer_autoclear=agent.message_buffer_autoclear,
            max_files_open=limits.max_files_open,
            per_file_view_window_char_limit=limits.view_chars,
            last_run_completion=last_run.completed_at if last_run else None,
            last_stop_reason=last_run.stop_reason if last_run else None,
            secrets=secrets,
            tool_exec_environment_variables=secrets,
            created_at=agent.created_at,
            updated_at=agent.updated_at,
        )


def _llm_config(agent: Agent) -> dict[str, Any] | None:
    """The stored llm_config, or one derived from the `provider/model` handle."""
    if agent.llm_config is not None:
        return agent.llm_config
    return derived_llm_config(agent.model, agent.context_window_limit) if agent.model else None


def derived_llm_config(handle: str, context_window: int | None) -> dict[str, Any]:
    """Letta's llm_config for a `provider/model` handle on the configured OpenAI-compatible endpoint."""
    provider, name = handle.split("/", 1)
    return LLMConfig(
        model=name,
        model_endpoint_type=endpoint_type(provider),
        provider_name=endpoint_type(provider),
        context_window=context_window or 32_000,
        handle=handle,
    ).model_dump()

"""The agent file (`.af`) as Letta 0.16.8 writes it: the multi-entity format (`agents`, `blocks`,
`tools`, … with file-local ids such as `agent-0` and `block-1` that the entities use to refer to
each other). Read leniently: unknown fields are ignored and absent ones take Letta's defaults.

memvm writes the same shape, plus a few fields a Letta reader ignores: an agent's
`memory_render_mode`, `archive_ids`, `memvm_llm_config` and `memvm_embedding_config`, a block's
`version`, a message's `memvm_kind`, and the top-level `archives` (archival passages, when an
export asks for them).

Folders travel as Letta's `sources` (id `source-0`, …), their files as `files` (`file-0`, …, with
their text as `content`; chunks and vectors are made again on import), and each agent's view of
them as its `files_agents`. An open view's `start_line`/`end_line` are memvm's: the file's own
1-based lines, the last one included (Letta's exports leave them out).
"""

from datetime import datetime
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from memvm.memory.rules import DEFAULT_BLOCK_LIMIT


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FileBlock(_Lenient):
    id: str
    label: str
    value: str | None = ""
    limit: int = DEFAULT_BLOCK_LIMIT
    description: str | None = None
    read_only: bool = False
    hidden: bool | None = None
    metadata: dict[str, Any] | None = Field(None, validation_alias=AliasChoices("metadata", "metadata_"))
    tags: list[str] | None = None
    version: int | None = Field(None, ge=1, description="memvm only: the block's version when exported.")


class FileTool(_Lenient):
    id: str
    name: str | None = None
    tool_type: str | None = "custom"
    description: str | None = None
    source_code: str | None = None
    source_type: str | None = None
    json_schema: dict[str, Any] | None = None
    args_json_schema: dict[str, Any] | None = None
    return_char_limit: int | None = None
    pip_requirements: list[dict[str, Any]] | None = None
    default_requires_approval: bool | None = None
    enable_parallel_execution: bool | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = Field(None, validation_alias=AliasChoices("metadata_", "metadata"))

    @property
    def display_name(self) -> str:
        return self.name or str((self.json_schema or {}).get("name") or self.id)


class FileMessage(_Lenient):
    id: str
    role: str
    content: list[dict[str, Any]] | str | None = None
    name: str | None = None
    otid: str | None = None
    sender_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_returns: list[dict[str, Any]] | None = None
    created_at: datetime | None = None
    approve: bool | None = None
    approval_request_id: str | None = None
    denial_reason: str | None = None
    approvals: list[dict[str, Any]] | None = None
    memvm_kind: str | None = Field(None, description="memvm only: heartbeat | summary | approval.")


class FileSource(_Lenient):
    """A folder (Letta's source)."""

    id: str
    name: str
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = Field(None, validation_alias=AliasChoices("metadata", "metadata_"))
    embedding: str | None = None
    embedding_chunk_size: int | None = None
    embedding_config: dict[str, Any] | None = None


class FileDocument(_Lenient):
    """A file of a folder: `file_name` is the name agents see ("<folder>/<name>"), `content` its text."""

    id: str
    source_id: str
    file_name: str | None = None
    original_file_name: str | None = None
    file_type: str | None = None
    file_size: int | None = Field(None, ge=0, lt=2**63)
    processing_status: str | None = None
    error_message: str | None = None
    content: str | None = None


class FileAttachment(_Lenient):
    """One of an agent's files as the agent sees it (a `files_agents` entry)."""

    id: str | None = None
    file_id: str
    is_open: bool = True
    visible_content: str | None = None
    last_accessed_at: datetime | None = None
    start_line: int | None = Field(None, ge=1)
    end_line: int | None = Field(None, ge=1)


class FileAgent(_Lenient):
    id: str
    name: str | None = None
    agent_type: str | None = "letta_v1_agent"
    system: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = Field(None, validation_alias=AliasChoices("metadata", "metadata_"))
    timezone: str | None = None
    tool_rules: list[dict[str, Any]] | None = None
    message_buffer_autoclear: bool | None = False
    llm_config: dict[str, Any] | None = None
    embedding_config: dict[str, Any] | None = None
    model: str | None = None
    embedding: str | None = None
    context_window_limit: int | None = None
    block_ids: list[str] = Field(default_factory=list)
    tool_ids: list[str] = Field(default_factory=list)
    in_context_message_ids: list[str] = Field(default_factory=list)
    tool_exec_environment_variables: dict[str, Any] | list[dict[str, Any]] | None = None
    secrets: dict[str, Any] | list[dict[str, Any]] | None = None
    source_ids: list[str] | None = None
    folder_ids: list[str] | None = None
    files_agents: list[FileAttachment] | None = None
    max_files_open: int | None = None
    per_file_view_window_char_limit: int | None = None
    group_ids: list[str] | None = None  # what memvm cannot recreate yet; listed as skipped when present
    # memvm only
    memory_render_mode: str | None = None
    archive_ids: list[str] = Field(default_factory=list)
    memvm_llm_config: dict[str, Any] | None = None  # the agent's own (Letta's llm_config is derived when absent)
    memvm_embedding_config: dict[str, Any] | None = None  # the agent's own, as stored (likewise)
    # Not a file field: the reader puts the number of messages here (they are streamed, not held).
    messages: int = 0


class FilePassage(_Lenient):
    text: str
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None


class FileArchive(_Lenient):
    """memvm only: an archive with its passages (their text; vectors are recomputed on import)."""

    id: str
    name: str
    description: str | None = None
    metadata: dict[str, Any] | None = None
    passages: list[FilePassage] = Field(default_factory=list)


class AgentFile(_Lenient):
    """Everything but the messages, which the reader streams (agentfiles/reader.py)."""

    agents: list[FileAgent] = Field(default_factory=list)
    blocks: list[FileBlock] = Field(default_factory=list)
    tools: list[FileTool] = Field(default_factory=list)
    groups: list[Any] = Field(default_factory=list)
    files: list[FileDocument] = Field(default_factory=list)
    sources: list[FileSource] = Field(default_factory=list)
    mcp_servers: list[Any] = Field(default_factory=list)
    skills: list[Any] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None
    archives: list[FileArchive] = Field(default_factory=list)

    @property
    def written_by_memvm(self) -> bool:
        return "memvm_version" in (self.metadata or {})

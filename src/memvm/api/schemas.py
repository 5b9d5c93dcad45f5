"""Response shapes of routes whose results are assembled here rather than by a domain schema, so
that /openapi.json describes every response."""

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from memvm.archives.schemas import PassageRead
from memvm.ids import new_id
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.sandbox.calls import ToolRunResult
from memvm.search.tools import ToolHit
from memvm.tools.schemas import ToolRead


class Deleted(BaseModel):
    message: str


# Letta answers attach, detach and some deletes with an empty body (`null`); the SDK types it as `object`.
NULL_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"description": "Done; the body is `null`.", "content": {"application/json": {"schema": {"type": "null"}}}}
}


class AgentRepository(BaseModel):
    """A code repository linked to an agent (Letta Code's shape); memvm links none."""

    id: str
    name: str
    is_primary: bool
    permissions: list[str]


class AgentRepositories(BaseModel):
    repositories: list[AgentRepository]


class LettaMessage(BaseModel):
    """One member of the Letta message union; `message_type` says which (user_message,
    assistant_message, reasoning_message, tool_call_message, tool_return_message, …) and which
    further fields it carries."""

    model_config = ConfigDict(extra="allow")

    id: str
    date: str
    message_type: str


class ToolExecutionResult(BaseModel):
    """letta-client's ToolExecutionResult: what running one of an agent's tools came to."""

    status: Literal["success", "error"]
    func_return: str
    stdout: list[str] | None
    stderr: list[str] | None

    @classmethod
    def of(cls, outcome: ToolOutcome) -> "ToolExecutionResult":
        return cls(
            status=outcome.status,
            func_return=outcome.message,
            stdout=[outcome.stdout] if outcome.stdout else None,
            stderr=[outcome.stderr] if outcome.stderr else None,
        )


class ToolRunResponse(BaseModel):
    """A tool return message for a run outside any agent (POST /v1/tools/run)."""

    id: str
    date: datetime
    message_type: Literal["tool_return_message"] = "tool_return_message"
    status: Literal["success", "error"]
    tool_return: str
    tool_call_id: str
    stdout: list[str] | None
    stderr: list[str] | None

    @classmethod
    def of(cls, result: ToolRunResult) -> "ToolRunResponse":
        message_id = new_id("message")
        return cls(
            id=message_id,
            date=datetime.now(UTC),
            status=result.status,
            tool_return=result.value,
            tool_call_id=message_id,
            stdout=[result.stdout] if result.stdout else None,
            stderr=[result.stderr] if result.stderr else None,
        )


class ContextWindowOverview(BaseModel):
    """Token estimates (about 4 characters per token) of what the model would receive now."""

    context_window_size_max: int
    context_window_size_current: int
    num_messages: int
    num_archival_memory: int
    num_messages_pending_embedding: int
    num_recall_memory: int
    num_tokens_system: int
    system_prompt: str
    num_tokens_core_memory: int
    core_memory: str
    num_tokens_functions_definitions: int
    functions_definitions: list[dict[str, Any]]
    num_tokens_summary_memory: int
    summary_memory: str | None
    num_tokens_messages: int
    messages: list[dict[str, Any]]
    num_tokens_external_memory_summary: int
    external_memory_summary: str


class CompactionResult(BaseModel):
    summary: str
    num_messages_before: int
    num_messages_after: int


class AgentPassageHit(BaseModel):
    id: str
    content: str
    tags: list[str]
    relevance: float
    timestamp: str  # in the agent's timezone


class AgentPassageSearch(BaseModel):
    results: list[AgentPassageHit]
    count: int


class PassageSearchResult(BaseModel):
    passage: PassageRead
    score: float
    metadata: dict[str, Any]


class AgentRef(BaseModel):
    id: str


class MessageSearchResult(BaseModel):
    message_type: str
    message_id: str
    agent_id: str
    conversation_id: str | None
    created_at: str
    content: str


class StoredMessage(BaseModel):
    id: str
    agent_id: str
    conversation_id: str | None  # None: the agent's default conversation
    role: str
    content: str | None
    tool_call_id: str | None
    name: str | None
    created_at: str
    run_id: str | None
    step_id: str | None


class RankedMessageSearchResult(BaseModel):
    embedded_text: str | None
    message: StoredMessage
    fts_rank: int | None
    vector_rank: int | None
    rrf_score: float


class ToolSearchResult(BaseModel):
    """One tool found by POST /v1/tools/search: its ranks in the full-text and vector lists (None
    where absent) and the fused score (0 when listed without a query)."""

    tool: ToolRead
    embedded_text: str | None
    fts_rank: int | None
    vector_rank: int | None
    combined_score: float

    @classmethod
    def of(cls, hit: ToolHit) -> "ToolSearchResult":
        score = hit.score
        return cls(
            tool=ToolRead.of(hit.tool),
            embedded_text=hit.tool.search_text,
            fts_rank=score.fts_rank if score else None,
            vector_rank=score.vector_rank if score else None,
            combined_score=score.rrf_score if score else 0.0,
        )

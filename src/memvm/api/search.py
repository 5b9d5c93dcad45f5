from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memvm.actors import Caller
from memvm.api.auth import CallerDep
from memvm.api.deps import RuntimeDep
from memvm.api.routers import api_router
from memvm.api.schemas import MessageSearchResult, RankedMessageSearchResult, StoredMessage
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.operations.message_search import search_history
from memvm.search.conversation import MessageHit

router = api_router(tags=["search"])


class MessageSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str = ""
    search_mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    agent_id: str | None = Field(None, pattern=r"^agent-")
    conversation_id: str | None = Field(
        None, max_length=200, description="`default` (with agent_id: the agent's own history) or conv-…; absent: every one."
    )
    roles: list[Literal["user", "assistant", "tool", "system"]] = Field(default_factory=list)
    limit: int = Field(50, ge=1, le=100)
    start_date: str | None = None
    end_date: str | None = None


@router.post("/v1/messages/search", response_model=list[MessageSearchResult])
async def search_messages(body: MessageSearch, runtime: RuntimeDep, caller: CallerDep) -> list[MessageSearchResult]:
    """Search stored messages (hybrid full text + meaning by default); best match first. Tool
    results are left out: the SDK's result types are system, user and assistant messages."""
    hits = await _search(
        runtime, caller, body if body.roles else body.model_copy(update={"roles": ["user", "assistant", "system"]})
    )
    return [_listed(hit) for hit in hits]


@router.post("/v1/agents/messages/search", response_model=list[RankedMessageSearchResult])
async def search_messages_ranked(body: MessageSearch, runtime: RuntimeDep, caller: CallerDep) -> list[RankedMessageSearchResult]:
    """Search stored messages with their ranks: fts_rank, vector_rank and the fused rrf_score."""
    hits = await _search(runtime, caller, body)
    return [
        RankedMessageSearchResult(
            embedded_text=hit.message.content,
            message=_stored(hit),
            fts_rank=hit.score.fts_rank,
            vector_rank=hit.score.vector_rank,
            rrf_score=hit.score.rrf_score,
        )
        for hit in hits
    ]


async def _search(runtime: RuntimeDeps, caller: Caller, body: MessageSearch) -> list[MessageHit]:
    return await search_history(
        runtime,
        caller,
        query=body.query,
        agent_id=body.agent_id,
        conversation_id=body.conversation_id,
        mode=body.search_mode,
        roles=list(body.roles),
        start_date=body.start_date,
        end_date=body.end_date,
        limit=body.limit,
    )


_MESSAGE_TYPE_OF_ROLE = {"user": "user_message", "assistant": "assistant_message", "system": "system_message"}


def _listed(hit: MessageHit) -> MessageSearchResult:
    message = hit.message
    return MessageSearchResult(
        message_type=_MESSAGE_TYPE_OF_ROLE.get(message.role, "tool_return_message"),
        message_id=message.id,
        agent_id=message.agent_id,
        conversation_id=message.conversation_id,
        created_at=message.created_at.isoformat(),
        content=message.content or "",
    )


def _stored(hit: MessageHit) -> StoredMessage:
    message = hit.message
    return StoredMessage(
        id=message.id,
        agent_id=message.agent_id,
        conversation_id=message.conversation_id,
        role=message.role,
        content=message.content,
        tool_call_id=message.tool_call_id,
        name=message.tool_name,
        created_at=message.created_at.isoformat(),
        run_id=message.run_id,
        step_id=message.step_id,
    )

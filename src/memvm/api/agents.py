from typing import Annotated, Any

from fastapi import Depends, Query, Request

from memvm.agents import service
from memvm.agents import views as agent_views
from memvm.agents.schemas import AgentCreate, AgentFields, AgentRead, AgentUpdate, SecretRead
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, ReadDep, RuntimeDep, TransactionDep, included_relations, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import AgentRepositories, CompactionResult, ContextWindowOverview, Deleted
from memvm.conversations.thread import ThreadRef
from memvm.db.pagination import PageRequest
from memvm.identities import service as identities
from memvm.ids import id_pattern
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.operations import context_window as window_operations

router = api_router(prefix="/v1/agents", tags=["agents"])
IncludeParam = Annotated[list[str] | None, Query(description="Relations to include, e.g. agent.blocks, agent.tags.")]


def _embedding_in_reach(runtime: RuntimeDeps, fields: AgentFields) -> None:
    """An embedding model this server cannot use (e.g. its vector size is unknown) would fail each of
    the agent's turns and archival inserts later: it is a 400 now, before anything is stored."""
    service.check_handles(fields)
    if fields.embedding is not None:
        runtime.embedders.for_handle(fields.embedding)


@router.post("/", response_model=AgentRead)
async def create_agent(body: AgentCreate, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep) -> AgentRead:
    """Create an agent with new (`memory_blocks`) and existing (`block_ids`) core-memory blocks."""
    _embedding_in_reach(runtime, body)
    async with tx() as session:
        new = await service.create_agent(session, body, actor=caller.actor)
        return await agent_views.describe_new(session, new, body)


@router.get("/", response_model=list[AgentRead])
async def list_agents(
    request: Request,
    read: ReadDep,
    page: Annotated[PageRequest, Depends(page_params(50, "desc"))],
    name: str | None = None,
    query_text: str | None = Query(None, description="Case-insensitive substring of the name."),
    tags: Annotated[list[str] | None, Query()] = None,
    match_all_tags: bool = False,
    identity_id: Annotated[str | None, Query(pattern=id_pattern("identity"), description="Agents of this identity.")] = None,
    identifier_keys: Annotated[list[str] | None, Query(description="Agents of the identities with these keys.")] = None,
    include: IncludeParam = None,
) -> list[AgentRead]:
    """List agents, newest first by default; filter by name, tags or identity; page with before/after."""
    among = identities.member_ids_query("agent", identity_id=identity_id, identifier_keys=identifier_keys or ())
    async with read() as session:
        agents = await service.list_agents(
            session,
            page,
            name=name,
            query_text=query_text,
            tags=tags or (),
            match_all_tags=match_all_tags,
            among=among if identity_id or identifier_keys else None,
        )
        return await agent_views.describe(session, agents, include=included_relations(request, include))


@router.get("/{agent_id}", response_model=AgentRead)
async def retrieve_agent(request: Request, agent_id: AgentId, read: ReadDep, include: IncludeParam = None) -> AgentRead:
    """Get one agent; `include` selects relations as the Letta SDK sends it."""
    async with read() as session:
        agent = await service.get_agent_to_describe(session, agent_id)
        return await agent_views.describe_with_blocks(session, agent, include=included_relations(request, include))


@router.patch("/{agent_id}", response_model=AgentRead)
async def update_agent(agent_id: AgentId, body: AgentUpdate, runtime: RuntimeDep, tx: TransactionDep) -> AgentRead:
    """Change an agent; `block_ids` replaces its blocks. Prompt-affecting changes recompile the prompt."""
    _embedding_in_reach(runtime, body)
    async with tx() as session:
        agent = await service.update_agent(session, agent_id, body)
        [view] = await agent_views.describe(session, [agent], include=None)
    return view


@router.delete("/{agent_id}", response_model=Deleted)
async def delete_agent(agent_id: AgentId, tx: TransactionDep) -> Deleted:
    """Delete an agent. Its blocks remain (they may be shared)."""
    async with tx() as session:
        await service.delete_agent(session, agent_id)
    return Deleted(message=f"Agent id={agent_id} successfully deleted")


@router.post("/{agent_id}/recompile", response_model=str)
async def recompile(agent_id: AgentId, tx: TransactionDep, update_timestamp: bool = False, dry_run: bool = False) -> str:
    """Recompile and return the agent's system prompt; `dry_run` computes it without storing."""
    async with tx() as session:
        return await service.recompile(session, agent_id, update_timestamp=update_timestamp, dry_run=dry_run)


@router.get("/{agent_id}/context", response_model=ContextWindowOverview)
async def context_window(agent_id: AgentId, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Token breakdown of the agent's context window: system, core memory, tools, summary, messages."""
    return await window_operations.context_overview(runtime, caller, agent_id)


@router.post("/{agent_id}/summarize", response_model=CompactionResult)
async def summarize(agent_id: AgentId, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Compact the context window now: older messages become one summary; history stays searchable."""
    return await window_operations.summarize(runtime, caller, ThreadRef.default_of(agent_id))


@router.patch("/{agent_id}/reset-messages", response_model=AgentRead)
async def reset_messages(agent_id: AgentId, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep) -> AgentRead:
    """Empty the context window; the conversation history stays stored and searchable."""
    await window_operations.reset_messages(runtime, caller, agent_id)
    async with tx() as session:
        agent = await service.get_agent(session, agent_id)
        [view] = await agent_views.describe(session, [agent], include=None)
    return view


@router.get("/{agent_id}/secrets", response_model=list[SecretRead])
async def list_secrets(agent_id: AgentId, tx: TransactionDep) -> list[SecretRead]:
    """The names of the variables the agent's tools get (`secrets`), by name; values are never shown."""
    async with tx() as session:
        agent = await service.get_agent(session, agent_id)
    return [SecretRead(agent_id=agent.id, key=key) for key in sorted(agent.tool_secrets)]


@router.get("/{agent_id}/repositories", response_model=AgentRepositories)
async def list_repositories(agent_id: AgentId, tx: TransactionDep) -> AgentRepositories:
    """Code repositories linked to the agent (Letta Code asks): always none on memvm."""
    async with tx() as session:
        await service.get_agent(session, agent_id)
    return AgentRepositories(repositories=[])

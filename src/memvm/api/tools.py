from typing import Annotated, Any, Literal

from fastapi import Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.agents.views import describe
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import ToolExecutionResult, ToolRunResponse, ToolSearchResult
from memvm.db.pagination import PageRequest, page_of
from memvm.errors import InvalidInput
from memvm.ids import id_pattern
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.operations.agent_tools import run_agent_tool
from memvm.runtime.operations.tool_search import find_tools
from memvm.runtime.tools.sandboxed import pip_specifiers, run_source
from memvm.tools import service
from memvm.tools.builtin import BUILTIN_SPECS
from memvm.tools.schemas import ToolCreate, ToolRead, ToolRunRequest, ToolUpdate
from memvm.tools.service import ToolFilter

router = api_router(tags=["tools"])
ToolId = Annotated[str, Path(pattern=id_pattern("tool"), description="tool-<uuid4>")]


async def _tool_filter(
    name: str | None = None,
    names: Annotated[list[str] | None, Query()] = None,
    tool_types: Annotated[list[str] | None, Query()] = None,
    exclude_tool_types: Annotated[list[str] | None, Query()] = None,
    search: str | None = Query(None, description="Case-insensitive substring of the name."),
) -> ToolFilter:
    return ToolFilter(
        names=[*(names or ()), *([name] if name else [])],
        tool_types=tool_types or (),
        exclude_tool_types=exclude_tool_types or (),
        search=search,
    )


FilterDep = Annotated[ToolFilter, Depends(_tool_filter)]


@router.get("/v1/tools/", response_model=list[ToolRead])
async def list_tools(
    tx: TransactionDep, tool_filter: FilterDep, page: Annotated[PageRequest, Depends(page_params(50, "asc"))]
) -> list[ToolRead]:
    """The built-in tools and your organization's custom tools, oldest first by default."""
    async with tx() as session:
        return [ToolRead.of(tool) for tool in await service.list_tools(session, page, tool_filter)]


@router.get("/v1/tools/count", response_model=int)
async def count_tools(tx: TransactionDep, tool_filter: FilterDep) -> int:
    """How many tools the same filters as the list would show."""
    async with tx() as session:
        return await service.count_tools(session, tool_filter)


@router.post("/v1/tools/", response_model=ToolRead)
async def create_tool(body: ToolCreate, runtime: RuntimeDep, tx: TransactionDep) -> ToolRead:
    """Create a custom tool from Python source; its JSON schema is derived from the function's signature
    and Google-style docstring unless `json_schema` is given. The source is parsed, not run; its
    `pip_requirements` venv starts building at once."""
    async with tx() as session:
        tool = ToolRead.of(await service.create_tool(session, body))
    return _preparing(runtime, tool)


@router.put("/v1/tools/", response_model=ToolRead)
async def upsert_tool(body: ToolCreate, runtime: RuntimeDep, tx: TransactionDep) -> ToolRead:
    """Create a custom tool, or replace your organization's tool of the same function name."""
    async with tx() as session:
        tool = ToolRead.of(await service.upsert_tool(session, body))
    return _preparing(runtime, tool)


@router.post("/v1/tools/add-base-tools", response_model=list[ToolRead])
async def add_base_tools(tx: TransactionDep) -> list[ToolRead]:
    """Letta upserts its base tools here. memvm's built-ins are kept current by the server at start
    and shared read-only, so nothing changes: the answer is the list of them."""
    async with tx() as session:
        builtins = await service.tools_named(session, list(BUILTIN_SPECS))
    return [ToolRead.of(builtins[name]) for name in BUILTIN_SPECS if name in builtins]


@router.post("/v1/tools/run", response_model=ToolRunResponse)
async def run_tool_source(body: ToolRunRequest, runtime: RuntimeDep) -> ToolRunResponse:
    """Run a tool's source with arguments in the sandbox, for debugging; nothing is stored. The
    answer has the shape of a tool return message: status, return value, stdout and stderr."""
    result = await run_source(
        runtime.sandbox,
        body.source_code,
        body.args,
        env=body.env_vars,
        return_char_limit=body.return_char_limit,
        requirements=pip_specifiers([requirement.model_dump() for requirement in body.pip_requirements]),
        name=body.name,
    )
    return ToolRunResponse.of(result)


class ToolSearch(BaseModel):
    """The SDK's ToolSearchParams; a field it does not have is refused rather than ignored."""

    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(None, description="What to look for; none lists the matching tools newest first.")
    search_mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    tool_types: list[str] | None = Field(None, description="Only tools of these types (e.g. 'custom', 'letta_core').")
    tags: list[str] | None = Field(None, description="Only tools with any of these tags.")
    limit: int = Field(50, ge=1, le=100)


@router.post("/v1/tools/search", response_model=list[ToolSearchResult])
async def search_tools(body: ToolSearch, runtime: RuntimeDep, caller: CallerDep) -> list[ToolSearchResult]:
    """Search your organization's tools and the built-ins by name, description, parameters, tags and
    source: hybrid (full text and meaning, fused by reciprocal rank) by default; best match first. A
    tool is found by meaning once the embedding worker has embedded it, shortly after it was saved."""
    hits = await find_tools(
        runtime,
        caller,
        query=body.query or "",
        mode=body.search_mode,
        tool_types=body.tool_types or (),
        tags=body.tags or (),
        limit=body.limit,
    )
    return [ToolSearchResult.of(hit) for hit in hits]


@router.patch("/v1/tools/{tool_id}", response_model=ToolRead)
async def update_tool(tool_id: ToolId, body: ToolUpdate, runtime: RuntimeDep, tx: TransactionDep) -> ToolRead:
    """Change a custom tool; new source re-derives its name and schema. Built-in tools are read-only (403)."""
    async with tx() as session:
        tool = ToolRead.of(await service.update_tool(session, tool_id, body))
    return _preparing(runtime, tool)


def _preparing(runtime: RuntimeDeps, tool: ToolRead) -> ToolRead:
    """After the commit: wake the embedding worker (a changed tool waits for its search vector) and
    start building the tool's requirements venv, so its first call need not wait."""
    runtime.embedding_wakeup.set()
    if tool.pip_requirements:
        runtime.sandbox.prepare(pip_specifiers(tool.pip_requirements))
    return tool


@router.delete("/v1/tools/{tool_id}", status_code=204)
async def delete_tool(tool_id: ToolId, tx: TransactionDep) -> Response:
    """Delete a custom tool and detach it from every agent. Built-in tools cannot be deleted (403)."""
    async with tx() as session:
        await service.delete_tool(session, tool_id)
    return Response(status_code=204)


@router.get("/v1/tools/{tool_id}", response_model=ToolRead)
async def retrieve_tool(tool_id: ToolId, tx: TransactionDep) -> ToolRead:
    """One tool, with the JSON schema the model sees."""
    async with tx() as session:
        return ToolRead.of(await service.get_tool(session, tool_id))


@router.get("/v1/agents/{agent_id}/tools", response_model=list[ToolRead])
async def list_agent_tools(
    agent_id: AgentId, tx: TransactionDep, page: Annotated[PageRequest, Depends(page_params(50, "asc"))]
) -> list[ToolRead]:
    """The tools attached to an agent, in the order they were attached."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        attached = await service.agent_tools(session, agent_id)
    return [ToolRead.of(tool) for tool in page_of(attached, page)]


@router.patch("/v1/agents/{agent_id}/tools/attach/{tool_id}", response_model=AgentRead)
async def attach_tool(agent_id: AgentId, tool_id: ToolId, tx: TransactionDep) -> AgentRead:
    """Attach a tool to an agent (idempotent); it is offered to the model from the next turn on."""
    async with tx() as session:
        agent = await agents.attach_tool(session, agent_id, tool_id)
        [view] = await describe(session, [agent], include=None)
    return view


class AgentToolRun(BaseModel):
    """letta-client's ToolRunParams (the agent comes from the path)."""

    model_config = ConfigDict(extra="forbid")

    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments by name.")


@router.post("/v1/agents/{agent_id}/tools/{tool_name}/run", response_model=ToolExecutionResult)
async def run_agent_tool_by_name(
    agent_id: AgentId,
    tool_name: Annotated[str, Path(min_length=1, max_length=200)],
    runtime: RuntimeDep,
    caller: CallerDep,
    body: AgentToolRun | None = None,
) -> ToolExecutionResult:
    """Run one of the agent's attached tools with these arguments, as a turn would run the model's
    call: a custom tool in the sandbox with the agent's secrets, a built-in on the agent's memory
    (its changes recorded as yours). Nothing is added to the conversation. Bad arguments, or a tool
    that fails, are an `error` result, as the model would see them."""
    outcome = await run_agent_tool(runtime, caller, agent_id, tool_name, (body or AgentToolRun()).args)
    return ToolExecutionResult.of(outcome)


class ApprovalSetting(BaseModel):
    requires_approval: bool


@router.patch("/v1/agents/{agent_id}/tools/approval/{tool_name}", response_model=AgentRead)
async def update_tool_approval(
    agent_id: AgentId,
    tool_name: Annotated[str, Path(min_length=1, max_length=200)],
    tx: TransactionDep,
    body: ApprovalSetting | None = None,
    requires_approval: Annotated[bool | None, Query(description="Letta also accepts it here.")] = None,
) -> AgentRead:
    """Whether the agent's calls to this tool wait for a human's approval (a requires_approval rule)."""
    required = body.requires_approval if body is not None else requires_approval
    if required is None:
        raise InvalidInput('Send {"requires_approval": true|false} in the body (or as a query parameter).')
    async with tx() as session:
        agent = await agents.set_requires_approval(session, agent_id, tool_name, required=required)
        [view] = await describe(session, [agent], include=None)
    return view


@router.patch("/v1/agents/{agent_id}/tools/detach/{tool_id}", response_model=AgentRead)
async def detach_tool(agent_id: AgentId, tool_id: ToolId, tx: TransactionDep) -> AgentRead:
    """Detach a tool from an agent."""
    async with tx() as session:
        agent = await agents.detach_tool(session, agent_id, tool_id)
        [view] = await describe(session, [agent], include=None)
    return view

"""Console: an agent's archival memory (search with tag and date filters, insert, delete, its
archives) and its tools (schemas and rules; attach and detach), through the REST routes' services."""

from typing import Annotated, Any, Literal, TypeVar

from fastapi import Form, Path, Query, Request, Response
from pydantic import BaseModel, ValidationError

from memvm.agents import service as agents
from memvm.api.console.session import PREFIX, ConsoleCaller, ConsoleTx, console_router, page
from memvm.api.deps import AgentId, RuntimeDep
from memvm.archives import service as archives
from memvm.archives.schemas import PassageCreate, SearchFilters
from memvm.db.pagination import PageRequest
from memvm.errors import InvalidInput
from memvm.ids import id_pattern
from memvm.runtime.operations import passages
from memvm.tools import service as tools

router = console_router(f"{PREFIX}/agents/{{agent_id}}")
NEWEST_PASSAGES = 20
ATTACHABLE_TOOLS = 500  # the attach list shows the organization's tools up to this many
PassageId = Annotated[str, Path(pattern=id_pattern("passage"))]
ToolId = Annotated[str, Path(pattern=id_pattern("tool"))]
Text = Annotated[str, Query(max_length=10_000)]
Valid = TypeVar("Valid", bound=BaseModel)


@router.get("/archival")
async def archival_view(
    request: Request,
    runtime: RuntimeDep,
    agent_id: AgentId,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    query: Text = "",
    tags: Text = "",
    tag_match_mode: Literal["any", "all"] = "any",
    start: Text = "",
    end: Text = "",
    top_k: Annotated[int, Query(ge=1, le=100)] = 10,
) -> Response:
    """With a query: the nearest passages, filtered before the limit, with their scores. Without:
    the newest passages."""
    form = {"query": query, "tags": tags, "tag_match_mode": tag_match_mode, "start": start, "end": end, "top_k": top_k}
    hits = None
    if query.strip():
        filters = _filters(query, tags, tag_match_mode, start, end, top_k)
        found, _ = await passages.search_for_agent(runtime, caller, agent_id, filters)
        hits = [(hit.passage, hit.relevance) for hit in found]
    return await _archival_page(request, agent_id, tx, form=form, hits=hits)


@router.post("/archival")
async def insert_passage(
    request: Request,
    runtime: RuntimeDep,
    agent_id: AgentId,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    text: Annotated[str, Form()],
    tags: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    item = _valid(PassageCreate, text=text.replace("\r\n", "\n"), tags=_tag_list(tags))
    [stored] = await passages.insert_for_agent(runtime, caller, agent_id, [item])
    return await _archival_page(request, agent_id, tx, notice=f"Stored passage {stored.id}.")


@router.post("/archival/{passage_id}/delete")
async def delete_passage(request: Request, agent_id: AgentId, passage_id: PassageId, tx: ConsoleTx) -> Response:
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        await archives.delete_agent_passage(session, agent_id, passage_id)
    return await _archival_page(request, agent_id, tx, notice=f"Deleted passage {passage_id}.")


@router.get("/tools")
async def tools_view(request: Request, agent_id: AgentId, tx: ConsoleTx) -> Response:
    return await _tools_page(request, agent_id, tx)


@router.post("/tools/attach")
async def attach_tool(
    request: Request, agent_id: AgentId, tx: ConsoleTx, tool_id: Annotated[str, Form(pattern=id_pattern("tool"))]
) -> Response:
    """As PATCH /v1/agents/{id}/tools/attach/{tool_id}."""
    async with tx() as session:
        await agents.attach_tool(session, agent_id, tool_id)
    return await _tools_page(request, agent_id, tx)


@router.post("/tools/{tool_id}/detach")
async def detach_tool(request: Request, agent_id: AgentId, tool_id: ToolId, tx: ConsoleTx) -> Response:
    """As PATCH /v1/agents/{id}/tools/detach/{tool_id}."""
    async with tx() as session:
        await agents.detach_tool(session, agent_id, tool_id)
    return await _tools_page(request, agent_id, tx)


async def _archival_page(
    request: Request,
    agent_id: str,
    tx: ConsoleTx,
    *,
    form: dict[str, Any] | None = None,
    hits: list[Any] | None = None,
    notice: str | None = None,
) -> Response:
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        attached = await archives.archives_of(session, agent_id)
        newest = await archives.list_agent_passages(
            session, agent_id, search=None, after=None, before=None, limit=NEWEST_PASSAGES, ascending=False
        )
    form = form or {"query": "", "tags": "", "tag_match_mode": "any", "start": "", "end": "", "top_k": 10}
    context: dict[str, Any] = {"agent_id": agent_id, "archives": attached, "newest": newest, "hits": hits, "form": form}
    return page(request, "_archival.html", notice=notice, **context)


async def _tools_page(request: Request, agent_id: str, tx: ConsoleTx) -> Response:
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id)
        attached = await tools.agent_tools(session, agent_id)
        every = await tools.list_tools(session, PageRequest(limit=ATTACHABLE_TOOLS, order="asc"), tools.ToolFilter())
    attached_ids = {tool.id for tool in attached}
    available = [tool for tool in every if tool.id not in attached_ids]
    rules_of = {tool.name: [rule for rule in agent.tool_rules if rule.get("tool_name") == tool.name] for tool in attached}
    return page(request, "_tools.html", agent_id=agent_id, attached=attached, available=available, rules_of=rules_of)


def _filters(query: str, tags: str, mode: Literal["any", "all"], start: str, end: str, top_k: int) -> SearchFilters:
    return _valid(
        SearchFilters,
        query=query,
        tags=_tag_list(tags),
        tag_match_mode=mode,
        top_k=top_k,
        start_datetime=start or None,
        end_datetime=end or None,
    )


def _valid(model: type[Valid], **fields: Any) -> Valid:
    """The model built from form fields; what it refuses is a 400 that says why (the form's page)."""
    try:
        return model(**fields)
    except ValidationError as invalid:
        raise InvalidInput("; ".join(error["msg"] for error in invalid.errors())) from invalid


def _tag_list(tags: str) -> list[str]:
    return [tag.strip() for tag in tags.split(",") if tag.strip()]

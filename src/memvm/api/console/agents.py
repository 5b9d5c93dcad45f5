"""Console pages: sign-in, the agent list, an agent's page with its prompt and context window."""

from typing import Annotated, Any

from fastapi import Form, Query, Request, Response
from fastapi.responses import RedirectResponse

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.api.auth import GateDep
from memvm.api.console.session import (
    PREFIX,
    SIGN_IN,
    ConsoleCaller,
    ConsoleTx,
    clear_cookie,
    console_router,
    new_local_cookie,
    page,
    set_cookie,
)
from memvm.api.deps import AgentId, RuntimeDep
from memvm.blocks.schemas import BlockRead
from memvm.conversations.thread import ThreadRef
from memvm.db.pagination import PageRequest
from memvm.errors import Unauthenticated
from memvm.memory.compiler import RenderMode
from memvm.runs import service as runs
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.loop.models import context_window_of
from memvm.runtime.operations import context_window as window_operations

router = console_router(PREFIX)
AGENTS_PER_PAGE = 25
# The context window's parts, in the order the stacked bar draws them.
CONTEXT_PARTS = (
    ("system", "num_tokens_system"),
    ("core memory", "num_tokens_core_memory"),
    ("tools", "num_tokens_functions_definitions"),
    ("summary", "num_tokens_summary_memory"),
    ("messages", "num_tokens_messages"),
)


@router.get("/")
async def home() -> Response:
    return RedirectResponse(f"{PREFIX}/agents", status_code=303)


@router.get("/sign-in")
async def sign_in_form(request: Request, gate: GateDep) -> Response:
    if not await gate.keys_required():  # local mode: nothing to sign in with
        response = RedirectResponse(f"{PREFIX}/agents", status_code=303)
        set_cookie(response, request, new_local_cookie())
        return response
    return page(request, "sign_in.html", error=None)


@router.post("/sign-in")
async def sign_in(request: Request, gate: GateDep, key: Annotated[str, Form()]) -> Response:
    key = key.strip()
    try:
        await gate.caller(key or None)
    except Unauthenticated as refused:
        return page(request, "sign_in.html", 401, error=refused.message)
    response = RedirectResponse(f"{PREFIX}/agents", status_code=303)
    set_cookie(response, request, key or new_local_cookie())
    return response


@router.post("/sign-out")
async def sign_out() -> Response:
    response = RedirectResponse(SIGN_IN, status_code=303)
    clear_cookie(response)
    return response


@router.get("/agents")
async def agent_list(
    request: Request,
    runtime: RuntimeDep,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    q: Annotated[str, Query(max_length=200)] = "",
    tag: Annotated[str, Query(max_length=200)] = "",
    after: Annotated[str | None, Query(max_length=100)] = None,
    before: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """Newest first, AGENTS_PER_PAGE at a time, by name and tag; `after`/`before` page on (one of them)."""
    backwards = before is not None and after is None
    listing = PageRequest(limit=AGENTS_PER_PAGE + 1, order="desc", after=None if backwards else after, before=before)
    async with tx() as session:
        found = await agents.list_agents(session, listing, query_text=q or None, tags=[tag] if tag else ())
        shown = found[-AGENTS_PER_PAGE:] if backwards else found[:AGENTS_PER_PAGE]
        ids = [agent.id for agent in shown]
        last_runs = await runs.latest_runs(session, ids)
        prompt_tokens = await runs.latest_prompt_tokens(session, ids)
    overflow = len(found) > AGENTS_PER_PAGE
    has_older, has_newer = (before is not None, overflow) if backwards else (overflow, after is not None)
    rows = [
        {
            "agent": agent,
            "run": last_runs.get(agent.id),
            "used": prompt_tokens.get(agent.id),
            "window": context_window_of(agent, runtime.settings),
        }
        for agent in shown
    ]
    return page(
        request,
        "agents.html",
        caller=caller,
        rows=rows,
        q=q,
        tag=tag,
        older=shown[-1].id if shown and has_older else None,
        newer=shown[0].id if shown and has_newer else None,
    )


@router.get("/agents/{agent_id}")
async def agent_page(request: Request, agent_id: AgentId, caller: ConsoleCaller, tx: ConsoleTx) -> Response:
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id)
        blocks = [BlockRead.of(block) for block in await agents.agent_blocks(session, agent_id)]
        last_run = (await runs.latest_runs(session, [agent_id])).get(agent_id)
    return page(
        request,
        "agent.html",
        caller=caller,
        agent=agent,
        blocks=blocks,
        last_run=last_run,
        prompt=agent.compiled_system,  # as stored: in the agent's own render mode
        mode=RenderMode(agent.memory_render_mode),
        modes=list(RenderMode),
    )


@router.get("/agents/{agent_id}/prompt")
async def prompt_view(request: Request, agent_id: AgentId, tx: ConsoleTx, mode: RenderMode = RenderMode.STANDARD) -> Response:
    """The compiled system prompt in one render mode (the agent keeps its own)."""
    async with tx() as session:
        prompt = await agents.prompt_in_mode(session, agent_id, mode)
    return page(request, "_prompt.html", agent_id=agent_id, prompt=prompt, mode=mode, modes=list(RenderMode))


@router.get("/agents/{agent_id}/context")
async def context_view(request: Request, runtime: RuntimeDep, agent_id: AgentId, caller: ConsoleCaller) -> Response:
    return page(request, "_context.html", agent_id=agent_id, **await _context(runtime, caller, agent_id))


@router.post("/agents/{agent_id}/compact")
async def compact_now(request: Request, runtime: RuntimeDep, agent_id: AgentId, caller: ConsoleCaller) -> Response:
    """Summarize the older messages now (as POST /v1/agents/{id}/summarize)."""
    result = await window_operations.summarize(runtime, caller, ThreadRef.default_of(agent_id))
    notice = f"Compacted: {result['num_messages_before']} messages in the window before, {result['num_messages_after']} after."
    context = await _context(runtime, caller, agent_id)
    return page(request, "_context.html", agent_id=agent_id, notice=notice, **context)


async def _context(runtime: RuntimeDeps, caller: Caller, agent_id: str) -> dict[str, Any]:
    overview = await window_operations.context_overview(runtime, caller, agent_id)
    window = overview["context_window_size_max"]
    parts = [(name, overview[key]) for name, key in CONTEXT_PARTS]
    return {"context_parts": parts, "context_used": overview["context_window_size_current"], "context_window": window}

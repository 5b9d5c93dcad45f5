"""Console: edit an agent's core-memory blocks, and walk a block's history (undo, redo, restore).

Every change goes through the same services as the REST routes, with the version the form was
rendered from as its If-Match: an edit made meanwhile (by an agent, another tab, the API) is a
conflict the operator resolves, never a silent overwrite."""

from typing import Annotated, Literal

from fastapi import Form, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.agents import service as agents
from memvm.api.console.diff import DiffRow, side_by_side
from memvm.api.console.session import PREFIX, ConsoleCaller, ConsoleTx, console_router, page
from memvm.api.deps import AgentId, BlockId
from memvm.blocks import history
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockHistoryEntry, BlockRead, BlockUpdate, HistoryPage
from memvm.errors import InvalidInput, LimitExceeded, NotFound, PreconditionFailed
from memvm.memory.rules import MAX_VERSION

router = console_router(f"{PREFIX}/agents/{{agent_id}}/blocks/{{block_id}}")
VERSIONS_PER_PAGE = 20
# Tells the page's prompt and context sections to reload (htmx event).
MEMORY_CHANGED = {"hx-trigger": "memory-changed"}
Version = Annotated[int, Form(ge=1, le=MAX_VERSION)]


@router.get("")
async def block_card(request: Request, agent_id: AgentId, block_id: BlockId, tx: ConsoleTx) -> Response:
    """The block's card as it is now (after a conflict, to take the current version)."""
    async with tx() as session:
        block = await _attached(session, agent_id, block_id)
    return page(request, "_block.html", agent_id=agent_id, block=block, draft=None, error=None)


@router.post("")
async def edit_block(
    request: Request,
    agent_id: AgentId,
    block_id: BlockId,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    value: Annotated[str, Form()],
    version: Version,
) -> Response:
    """Save the value, if the block is still at `version`; otherwise show both versions."""
    value = value.replace("\r\n", "\n")  # browsers send form text with CRLF line ends
    try:
        async with tx() as session:
            await _attached(session, agent_id, block_id)
            edited = await blocks.update_block(session, block_id, BlockUpdate(value=value), if_match=version, actor=caller.actor)
            block = BlockRead.of(edited)
    except PreconditionFailed:
        async with tx() as session:
            current = await _attached(session, agent_id, block_id)
        rows = side_by_side(current.value, value)
        return page(request, "_conflict.html", 412, agent_id=agent_id, block=current, draft=value, base=version, rows=rows)
    except InvalidInput as refused:  # over the limit (422), or a value the block refuses (400)
        async with tx() as session:
            current = await _attached(session, agent_id, block_id)
        status = 422 if isinstance(refused, LimitExceeded) else 400
        return page(request, "_block.html", status, agent_id=agent_id, block=current, draft=value, error=refused.message)
    response = page(request, "_block.html", agent_id=agent_id, block=block, draft=None, error=None)
    response.headers.update(MEMORY_CHANGED)
    return response


@router.get("/history")
async def block_history(
    request: Request,
    agent_id: AgentId,
    block_id: BlockId,
    tx: ConsoleTx,
    before: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None,
) -> Response:
    """Newest first, VERSIONS_PER_PAGE at a time; each change beside the one before it."""
    async with tx() as session:
        block = await _attached(session, agent_id, block_id)
        entries = await history.history(
            session, block_id, HistoryPage(limit=VERSIONS_PER_PAGE + 1, before=before, after=None, as_diff=False)
        )
    shown = entries[:VERSIONS_PER_PAGE]
    changes = [{"entry": entry, "rows": _value_diff(entry)} for entry in shown]
    older = shown[-1].version if len(entries) > VERSIONS_PER_PAGE else None
    return page(request, "history.html", agent_id=agent_id, block=block, changes=changes, older=older)


@router.post("/restore")
async def restore(
    agent_id: AgentId,
    block_id: BlockId,
    caller: ConsoleCaller,
    tx: ConsoleTx,
    version: Version,
    restore_version: Annotated[int, Form(ge=1, le=MAX_VERSION)],
) -> Response:
    async with tx() as session:
        await _attached(session, agent_id, block_id)
        await history.restore(session, block_id, restore_version, if_match=version, actor=caller.actor)
    return _reload()


@router.post("/{direction}")
async def undo_or_redo(
    agent_id: AgentId,
    block_id: BlockId,
    direction: Literal["undo", "redo"],
    caller: ConsoleCaller,
    tx: ConsoleTx,
    version: Version,
) -> Response:
    async with tx() as session:
        await _attached(session, agent_id, block_id)
        await history.walk(session, block_id, direction, if_match=version, actor=caller.actor)
    return _reload()


def _value_diff(entry: BlockHistoryEntry) -> list[DiffRow]:
    """The value before and after this change, line against line (none if the value did not change)."""
    if "value" not in entry.changed_fields:
        return []
    return side_by_side((entry.old or {}).get("value", ""), entry.new["value"])


def _reload() -> Response:
    """htmx reloads the page: the history gains the new version at its top."""
    return Response(status_code=204, headers={"hx-refresh": "true"})


async def _attached(session: AsyncSession, agent_id: str, block_id: str) -> BlockRead:
    """The block, if it is one of the agent's (the console shows a block within its agent)."""
    for block in await agents.agent_blocks(session, agent_id):
        if block.id == block_id:
            return BlockRead.of(block)
    raise NotFound(f"Block {block_id!r} is not attached to agent {agent_id!r}.")

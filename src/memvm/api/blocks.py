from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request, Response

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.agents.views import describe
from memvm.api.auth import CallerDep
from memvm.api.deps import (
    BlockId,
    HistoryPageDep,
    IfMatchDep,
    ReadDep,
    TransactionDep,
    included_relations,
    page_params,
    with_etag,
)
from memvm.api.routers import api_router
from memvm.blocks import history, service
from memvm.blocks.schemas import BlockCreate, BlockHistoryEntry, BlockRead, BlockUpdate, BlockVersionRead, RestoreRequest
from memvm.db.pagination import PageRequest
from memvm.identities import service as identities
from memvm.ids import id_pattern
from memvm.memory.rules import MAX_VERSION

router = api_router(prefix="/v1/blocks", tags=["blocks"])


@router.post("/", response_model=BlockRead)
async def create_block(body: BlockCreate, caller: CallerDep, tx: TransactionDep, response: Response) -> BlockRead:
    """Create a standalone block, to attach to one or many agents."""
    async with tx() as session:
        [block] = await service.create_blocks(session, [body], actor=caller.actor)
        view = BlockRead.of(block)
    return with_etag(response, view)


@router.get("/", response_model=list[BlockRead])
async def list_blocks(
    read: ReadDep,
    page: Annotated[PageRequest, Depends(page_params(50, "asc"))],
    label: str | None = None,
    tags: Annotated[list[str] | None, Query()] = None,
    match_all_tags: bool = False,
    value_search: str | None = Query(None, description="Case-insensitive substring of the value."),
    identity_id: Annotated[str | None, Query(pattern=id_pattern("identity"), description="Blocks of this identity.")] = None,
) -> list[BlockRead]:
    """List blocks, oldest first by default; filter by label, tags, value text or identity."""
    among = identities.member_ids_query("block", identity_id=identity_id) if identity_id else None
    async with read() as session:
        found = await service.list_blocks(
            session, page, label=label, tags=tags or (), match_all_tags=match_all_tags, value_search=value_search, among=among
        )
        return [BlockRead.of(block) for block in found]


@router.get("/{block_id}", response_model=BlockRead)
async def retrieve_block(block_id: BlockId, read: ReadDep, response: Response) -> BlockRead:
    """One block; the ETag carries its version."""
    async with read() as session:
        view = BlockRead.of(await service.get_block(session, block_id))
    return with_etag(response, view)


@router.patch("/{block_id}", response_model=BlockRead)
async def update_block(
    block_id: BlockId, body: BlockUpdate, caller: CallerDep, tx: TransactionDep, if_match: IfMatchDep, response: Response
) -> BlockRead:
    """Edit a block; every agent it is attached to is recompiled. Honors If-Match."""
    async with tx() as session:
        view = BlockRead.of(await service.update_block(session, block_id, body, if_match=if_match, actor=caller.actor))
    return with_etag(response, view)


@router.delete("/{block_id}")
async def delete_block(block_id: BlockId, caller: CallerDep, tx: TransactionDep) -> Any:
    """Delete a block and detach it from every agent (their prompts are recompiled)."""
    async with tx() as session:
        await service.delete_block(session, block_id, actor=caller.actor)
    return None


@router.get("/{block_id}/agents", response_model=list[AgentRead])
async def list_block_agents(
    request: Request,
    block_id: BlockId,
    read: ReadDep,
    page: Annotated[PageRequest, Depends(page_params(50, "desc"))],
    include: Annotated[list[str] | None, Query()] = None,
) -> list[AgentRead]:
    """Agents this block is attached to."""
    async with read() as session:
        found = await agents.agents_of_block(session, block_id, page)
        return await describe(session, found, include=included_relations(request, include))


@router.get("/{block_id}/history", response_model=list[BlockHistoryEntry])
async def block_history(
    block_id: BlockId,
    read: ReadDep,
    page: HistoryPageDep,
) -> list[BlockHistoryEntry]:
    """The block's changes, newest first: version, time, the fields that changed (old and new, or the
    value as a unified diff), and who made it (API key, or agent with run, step and tool call). A
    deleted block's history stays readable; its newest entry is the delete."""
    async with read() as session:
        return await history.history(session, block_id, page)


@router.get("/{block_id}/versions/{version}", response_model=BlockVersionRead)
async def block_version(
    block_id: BlockId, version: Annotated[int, Path(ge=1, le=MAX_VERSION)], read: ReadDep
) -> BlockVersionRead:
    """The block as it was at one version."""
    async with read() as session:
        return BlockVersionRead.of(await history.version_of(session, block_id, version))


@router.post("/{block_id}/undo", response_model=BlockRead)
async def undo_block(
    block_id: BlockId, caller: CallerDep, tx: TransactionDep, if_match: IfMatchDep, response: Response
) -> BlockRead:
    """Bring back the content before the last edit, as an editor's undo does: a new version under the
    same lock, If-Match and limit rules as a PATCH (an old value over today's limit is a 422)."""
    async with tx() as session:
        view = BlockRead.of(await history.walk(session, block_id, "undo", if_match=if_match, actor=caller.actor))
    return with_etag(response, view)


@router.post("/{block_id}/redo", response_model=BlockRead)
async def redo_block(
    block_id: BlockId, caller: CallerDep, tx: TransactionDep, if_match: IfMatchDep, response: Response
) -> BlockRead:
    """Bring back what the last undo took away; a new edit since then leaves nothing to redo."""
    async with tx() as session:
        view = BlockRead.of(await history.walk(session, block_id, "redo", if_match=if_match, actor=caller.actor))
    return with_etag(response, view)


@router.post("/{block_id}/restore", response_model=BlockRead)
async def restore_block(
    block_id: BlockId, body: RestoreRequest, caller: CallerDep, tx: TransactionDep, if_match: IfMatchDep, response: Response
) -> BlockRead:
    """Bring back the content of `version`, with the same rules as undo; it counts as a new edit."""
    async with tx() as session:
        view = BlockRead.of(await history.restore(session, block_id, body.version, if_match=if_match, actor=caller.actor))
    return with_etag(response, view)

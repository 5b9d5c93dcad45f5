from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.api.auth import CallerDep
from memvm.api.deps import BlockId, IfMatchDep, TransactionDep, etag, included_relations, page_params
from memvm.blocks import service
from memvm.blocks.schemas import BlockCreate, BlockRead, BlockUpdate
from memvm.db.pagination import PageRequest

router = APIRouter(prefix="/v1/blocks", tags=["blocks"])


@router.post("/", response_model=BlockRead)
async def create_block(body: BlockCreate, caller: CallerDep, tx: TransactionDep, response: Response) -> BlockRead:
    """Create a standalone block, to attach to one or many agents."""
    async with tx() as session:
        [block] = await service.create_blocks(session, [body], actor=caller.actor)
        view = BlockRead.of(block)
    response.headers["ETag"] = etag(view.version)
    return view


@router.get("/", response_model=list[BlockRead])
async def list_blocks(
    tx: TransactionDep,
    page: Annotated[PageRequest, Depends(page_params(50, "asc"))],
    label: str | None = None,
    tags: Annotated[list[str] | None, Query()] = None,
    match_all_tags: bool = False,
    value_search: str | None = Query(None, description="Case-insensitive substring of the value."),
) -> list[BlockRead]:
    """List blocks, oldest first by default; filter by label, tags or value text."""
    async with tx() as session:
        found = await service.list_blocks(
            session, page, label=label, tags=tags or (), match_all_tags=match_all_tags, value_search=value_search
        )
        return [BlockRead.of(block) for block in found]


@router.get("/{block_id}", response_model=BlockRead)
async def retrieve_block(block_id: BlockId, tx: TransactionDep, response: Response) -> BlockRead:
    """One block; the ETag carries its version."""
    async with tx() as session:
        view = BlockRead.of(await service.get_block(session, block_id))
    response.headers["ETag"] = etag(view.version)
    return view


@router.patch("/{block_id}", response_model=BlockRead)
async def update_block(
    block_id: BlockId, body: BlockUpdate, caller: CallerDep, tx: TransactionDep, if_match: IfMatchDep, response: Response
) -> BlockRead:
    """Edit a block; every agent it is attached to is recompiled. Honors If-Match."""
    async with tx() as session:
        view = BlockRead.of(await service.update_block(session, block_id, body, if_match=if_match, actor=caller.actor))
    response.headers["ETag"] = etag(view.version)
    return view


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
    tx: TransactionDep,
    page: Annotated[PageRequest, Depends(page_params(50, "desc"))],
    include: Annotated[list[str] | None, Query()] = None,
) -> list[AgentRead]:
    """Agents this block is attached to."""
    async with tx() as session:
        found = await agents.agents_of_block(session, block_id, page)
        return await agents.describe(session, found, include=included_relations(request, include))

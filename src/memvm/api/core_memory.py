from typing import Annotated

from fastapi import Depends, Response

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.agents.views import describe_with_blocks
from memvm.api.auth import CallerDep
from memvm.api.deps import (
    AgentId,
    BlockId,
    HistoryPageDep,
    IfMatchDep,
    ReadDep,
    TransactionDep,
    page_params,
    with_etag,
)
from memvm.api.routers import api_router
from memvm.blocks import history
from memvm.blocks import service as blocks
from memvm.blocks.schemas import BlockHistoryEntry, BlockRead, BlockUpdate
from memvm.db.pagination import PageRequest, page_of

router = api_router(prefix="/v1/agents/{agent_id}/core-memory", tags=["core memory"])


@router.get("/blocks", response_model=list[BlockRead])
async def list_agent_blocks(
    agent_id: AgentId, read: ReadDep, page: Annotated[PageRequest, Depends(page_params(100, "asc"))]
) -> list[BlockRead]:
    """The agent's blocks; `order=asc` (the default) is prompt (attachment) order."""
    async with read() as session:
        attached = await agents.agent_blocks(session, agent_id)
    return [BlockRead.of(block) for block in page_of(attached, page)]


@router.get("/blocks/{block_label:path}/history", response_model=list[BlockHistoryEntry])
async def agent_block_history(
    agent_id: AgentId,
    block_label: str,
    read: ReadDep,
    page: HistoryPageDep,
) -> list[BlockHistoryEntry]:
    """The history of the agent's block with this label (as GET /v1/blocks/{block_id}/history).
    Declared before the by-label routes: a label may itself contain '/'."""
    async with read() as session:
        block = await agents.block_by_label(session, agent_id, block_label)
        return await history.history(session, block.id, page)


@router.get("/blocks/{block_label:path}", response_model=BlockRead)
async def retrieve_agent_block(agent_id: AgentId, block_label: str, read: ReadDep, response: Response) -> BlockRead:
    """One of the agent's blocks, by label; the ETag carries its version."""
    async with read() as session:
        block = BlockRead.of(await agents.block_by_label(session, agent_id, block_label))
    return with_etag(response, block)


@router.patch("/blocks/attach/{block_id}", response_model=AgentRead)
async def attach_block(agent_id: AgentId, block_id: BlockId, tx: TransactionDep) -> AgentRead:
    """Attach an existing block (idempotent); a label the agent already uses is a 409."""
    async with tx() as session:
        return await describe_with_blocks(session, await agents.attach_block(session, agent_id, block_id), include=None)


@router.patch("/blocks/detach/{block_id}", response_model=AgentRead)
async def detach_block(agent_id: AgentId, block_id: BlockId, tx: TransactionDep) -> AgentRead:
    """Detach a block from the agent; the block itself is kept."""
    async with tx() as session:
        return await describe_with_blocks(session, await agents.detach_block(session, agent_id, block_id), include=None)


@router.patch("/blocks/{block_label:path}", response_model=BlockRead)
async def update_agent_block(
    agent_id: AgentId,
    block_label: str,
    body: BlockUpdate,
    caller: CallerDep,
    tx: TransactionDep,
    if_match: IfMatchDep,
    response: Response,
) -> BlockRead:
    """Edit the agent's block by label; every agent sharing the block is recompiled. Honors If-Match."""
    async with tx() as session:
        block = await agents.locked_block_by_label(session, agent_id, block_label)
        view = BlockRead.of(await blocks.update_locked_block(session, block, body, if_match=if_match, actor=caller.actor))
    return with_etag(response, view)

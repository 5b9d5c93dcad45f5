from typing import Annotated

from fastapi import APIRouter, Depends, Path

from memvm.agents import service as agents
from memvm.agents.schemas import AgentRead
from memvm.api.deps import AgentId, TransactionDep, page_params
from memvm.db.pagination import PageRequest, page_of
from memvm.ids import id_pattern
from memvm.tools import service
from memvm.tools.schemas import ToolRead

router = APIRouter(tags=["tools"])
ToolId = Annotated[str, Path(pattern=id_pattern("tool"), description="tool-<uuid4>")]


@router.get("/v1/tools/", response_model=list[ToolRead])
async def list_tools(
    tx: TransactionDep, page: Annotated[PageRequest, Depends(page_params(50, "asc"))], name: str | None = None
) -> list[ToolRead]:
    """Tools this server provides."""
    async with tx() as session:
        return [ToolRead.of(tool) for tool in await service.list_tools(session, page, name=name)]


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
        agent = await agents.get_agent(session, agent_id, lock=True)
        await service.attach_tools(session, agent_id, [await service.get_tool(session, tool_id)])
        [view] = await agents.describe(session, [agent], include=None)
    return view


@router.patch("/v1/agents/{agent_id}/tools/detach/{tool_id}", response_model=AgentRead)
async def detach_tool(agent_id: AgentId, tool_id: ToolId, tx: TransactionDep) -> AgentRead:
    """Detach a tool from an agent."""
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        await service.detach_tool(session, agent_id, tool_id)
        [view] = await agents.describe(session, [agent], include=None)
    return view

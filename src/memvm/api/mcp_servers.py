"""MCP servers (Letta's /v1/mcp-servers/): an organization's tool sources, their tools, and a run
of one tool; and the agent-scoped routes Letta Code's `letta mcp` calls. Secrets never come back."""

from typing import Annotated

from fastapi import Path

from memvm.agents import service as agents
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep
from memvm.api.routers import api_router
from memvm.api.schemas import ToolExecutionResult, ToolSearchResult
from memvm.ids import id_pattern
from memvm.mcpservers import service
from memvm.mcpservers.schemas import McpServerCreate, McpServerRead, McpServerUpdate, McpToolRun, RefreshResult, ToolSearch
from memvm.runtime.operations import mcp_servers as operations
from memvm.runtime.operations.tool_search import find_tools
from memvm.tools.schemas import ToolRead
from memvm.tools.service import MCP_TOOL_TYPE

router = api_router(tags=["mcp-servers"])
McpServerId = Annotated[str, Path(pattern=id_pattern("mcp_server"), description="mcp_server-<uuid4>")]
ToolId = Annotated[str, Path(pattern=id_pattern("tool"), description="tool-<uuid4>")]


@router.post("/v1/mcp-servers/", response_model=McpServerRead)
async def create_mcp_server(body: McpServerCreate, runtime: RuntimeDep, caller: CallerDep) -> McpServerRead:
    """Add an MCP server (stdio, SSE or streamable HTTP) and store the tools it lists. A server that
    cannot be reached is still added, with `status: error` and the reason; refresh it later."""
    return await operations.create_server(runtime, caller, body)


@router.get("/v1/mcp-servers/", response_model=list[McpServerRead])
async def list_mcp_servers(tx: TransactionDep) -> list[McpServerRead]:
    """Your organization's MCP servers, oldest first, each with its health."""
    async with tx() as session:
        return [McpServerRead.of(server) for server in await service.list_servers(session)]


@router.get("/v1/mcp-servers/{mcp_server_id}", response_model=McpServerRead)
async def retrieve_mcp_server(mcp_server_id: McpServerId, runtime: RuntimeDep, caller: CallerDep) -> McpServerRead:
    """The server, with its health: what its last connect, list or call came to."""
    return await operations.read_server(runtime, caller, mcp_server_id)


@router.patch("/v1/mcp-servers/{mcp_server_id}", response_model=McpServerRead)
async def update_mcp_server(
    mcp_server_id: McpServerId, body: McpServerUpdate, runtime: RuntimeDep, caller: CallerDep
) -> McpServerRead:
    """Change the fields given (a masked secret sent back keeps the stored one). A change of how to
    reach the server reconnects and lists its tools again."""
    return await operations.update_server(runtime, caller, mcp_server_id, body)


@router.delete("/v1/mcp-servers/{mcp_server_id}", status_code=204)
async def delete_mcp_server(mcp_server_id: McpServerId, runtime: RuntimeDep, caller: CallerDep) -> None:
    """The server and its tools go; agents that had its tools attached lose them."""
    await operations.delete_server(runtime, caller, mcp_server_id)


@router.patch("/v1/mcp-servers/{mcp_server_id}/refresh", response_model=RefreshResult)
async def refresh_mcp_server_tools(
    mcp_server_id: McpServerId, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep, agent_id: str | None = None
) -> RefreshResult:
    """List the server's tools now: new ones are added, changed ones updated, gone ones deleted
    (and detached). 503 if the server cannot be reached; its tools then stay as they were."""
    if agent_id is not None:
        async with tx() as session:
            await agents.get_agent(session, agent_id)
    return await operations.refresh_server(runtime, caller, mcp_server_id)


@router.get("/v1/mcp-servers/{mcp_server_id}/tools", response_model=list[ToolRead])
async def list_mcp_server_tools(mcp_server_id: McpServerId, tx: TransactionDep) -> list[ToolRead]:
    """The server's tools as stored (its last list); attach them to agents like any tool."""
    async with tx() as session:
        return [ToolRead.of(tool) for tool in await service.server_tools(session, mcp_server_id)]


@router.get("/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}", response_model=ToolRead)
async def retrieve_mcp_server_tool(mcp_server_id: McpServerId, tool_id: ToolId, tx: TransactionDep) -> ToolRead:
    """One of the server's tools (404 for a tool of another server)."""
    async with tx() as session:
        return ToolRead.of(await service.server_tool(session, mcp_server_id, tool_id))


@router.post("/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run", response_model=ToolExecutionResult)
async def run_mcp_server_tool(
    mcp_server_id: McpServerId, tool_id: ToolId, runtime: RuntimeDep, caller: CallerDep, body: McpToolRun | None = None
) -> ToolExecutionResult:
    """Call the tool on its server with these arguments. Bad arguments, a tool error, or a server
    that fails or times out are an `error` result, as an agent would see them."""
    outcome = await operations.run_server_tool(runtime, caller, mcp_server_id, tool_id, (body or McpToolRun()).args)
    return ToolExecutionResult.of(outcome)


@router.get("/v1/agents/{agent_id}/mcp-servers", response_model=list[McpServerRead])
async def list_agent_mcp_servers(agent_id: AgentId, tx: TransactionDep) -> list[McpServerRead]:
    """The MCP servers the agent can use: its organization's."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        return [McpServerRead.of(server) for server in await service.list_servers(session)]


@router.get("/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools", response_model=list[ToolRead])
async def list_agent_mcp_server_tools(agent_id: AgentId, mcp_server_id: McpServerId, tx: TransactionDep) -> list[ToolRead]:
    """The tools of one of the MCP servers the agent can use."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        return [ToolRead.of(tool) for tool in await service.server_tools(session, mcp_server_id)]


@router.post("/v1/agents/{agent_id}/mcp-servers/tools/search", response_model=list[ToolSearchResult])
async def search_agent_mcp_tools(
    agent_id: AgentId, body: ToolSearch, runtime: RuntimeDep, caller: CallerDep, tx: TransactionDep
) -> list[ToolSearchResult]:
    """Search the MCP servers' tools by name, description and parameters, best match first."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
    hits = await find_tools(
        runtime, caller, query=body.query, mode=body.search_mode, tool_types=[MCP_TOOL_TYPE], tags=(), limit=body.limit
    )
    return [ToolSearchResult.of(hit) for hit in hits]


@router.post("/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools/{tool_id}/run", response_model=ToolExecutionResult)
async def run_agent_mcp_tool(
    agent_id: AgentId,
    mcp_server_id: McpServerId,
    tool_id: ToolId,
    runtime: RuntimeDep,
    caller: CallerDep,
    tx: TransactionDep,
    body: McpToolRun | None = None,
) -> ToolExecutionResult:
    """Call one of an MCP server's tools for the agent (nothing is added to its conversation)."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
    outcome = await operations.run_server_tool(runtime, caller, mcp_server_id, tool_id, (body or McpToolRun()).args)
    return ToolExecutionResult.of(outcome)

"""MCP servers over the API: the row changes in one transaction each, and every talk with a server
(connect, tools/list, tools/call) between transactions, never inside one. What a server answered
or failed with is recorded as its health."""

from memvm.actors import Caller
from memvm.db.uow import transaction
from memvm.errors import Unavailable
from memvm.mcpclient.types import McpUnavailable
from memvm.mcpservers import service
from memvm.mcpservers.schemas import McpServerCreate, McpServerRead, McpServerUpdate, RefreshResult
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.runtime.tools.mcp_calls import McpCalls, McpTool, tool_call
from memvm.runtime.tools.outcome import ToolOutcome


async def create_server(deps: RuntimeDeps, caller: Caller, data: McpServerCreate) -> McpServerRead:
    """The server is stored, then its tools are listed and stored. A server that cannot be reached
    is still created (as Letta does), with its error as its status; refresh lists its tools later."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        server = await service.create_server(session, data)
    await _sync(deps, caller, server.id)
    return await read_server(deps, caller, server.id)


async def update_server(deps: RuntimeDeps, caller: Caller, server_id: str, data: McpServerUpdate) -> McpServerRead:
    """A change of how to reach the server replaces this process's session and lists its tools again."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        _, reconnect = await service.update_server(session, server_id, data)
    if reconnect:
        await deps.mcp.forget(server_id)
        await _sync(deps, caller, server_id)
    return await read_server(deps, caller, server_id)


async def delete_server(deps: RuntimeDeps, caller: Caller, server_id: str) -> None:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        await service.delete_server(session, server_id)
    await deps.mcp.forget(server_id)


async def read_server(deps: RuntimeDeps, caller: Caller, server_id: str) -> McpServerRead:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        return McpServerRead.of(await service.get_server(session, server_id))


async def refresh_server(deps: RuntimeDeps, caller: Caller, server_id: str) -> RefreshResult:
    """List the server's tools now and make its stored tools match; a server that cannot be
    reached is a 503 that says why, and its tools stay as they were."""
    result = await _sync(deps, caller, server_id)
    if isinstance(result, McpUnavailable):
        raise Unavailable(f"MCP server {server_id!r} could not list its tools: {result}")
    return result


async def _sync(deps: RuntimeDeps, caller: Caller, server_id: str) -> RefreshResult | McpUnavailable:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        config = service.connection_of(await service.get_server(session, server_id))
    try:
        remote = await deps.mcp.list_tools(config)
    except McpUnavailable as failed:
        async with transaction(deps.sessionmaker, caller.organization_id) as session:
            await service.record_status(session, server_id, str(failed))
        return failed
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        result = await service.apply_tools(session, server_id, remote)
        await service.record_status(session, server_id, None)
    return result


async def run_server_tool(
    deps: RuntimeDeps, caller: Caller, server_id: str, tool_id: str, args: dict[str, object]
) -> ToolOutcome:
    """One call of one of the server's tools with these arguments, outside any agent: the same
    checks, timeout and limits as an agent's call."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        tool = await service.server_tool(session, server_id, tool_id)
        state = (await service.states_of(session, [server_id]))[server_id]
    timeout = deps.settings.mcp_call_timeout_seconds
    calls = McpCalls(deps.mcp, deps.sessionmaker, caller.organization_id, {server_id: state}, timeout)
    mcp_tool = McpTool.of(tool)
    return await calls.run(mcp_tool, tool_call(mcp_tool, args))

"""MCP tools: a call goes to the tool's server through this process's session to it, before the
step's transaction opens (as custom tools run in the sandbox then). A server that hangs, crashes or
answers garbage gives the agent an error result naming the server; its health is recorded in a
transaction of its own when it changes."""

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm import metrics
from memvm.db.uow import transaction
from memvm.llm.types import ToolCall, ToolSpec
from memvm.mcpclient.connections import Connections
from memvm.mcpclient.types import McpUnavailable
from memvm.mcpservers import service as mcpservers
from memvm.mcpservers.service import ServerState
from memvm.orm import Tool
from memvm.runtime.tools.arguments import check_names, parse_arguments
from memvm.runtime.tools.outcome import ToolOutcome, clip


@dataclass(frozen=True)
class McpTool:
    """What a turn needs of an attached MCP tool."""

    name: str
    server_id: str
    spec: ToolSpec
    return_char_limit: int

    @classmethod
    def of(cls, tool: Tool) -> "McpTool":
        if tool.mcp_server_id is None:
            raise ValueError(f"tool {tool.id} is not an MCP server's tool")
        schema = tool.json_schema
        spec = ToolSpec(tool.name, schema.get("description") or tool.description, schema.get("parameters") or {})
        return cls(tool.name, tool.mcp_server_id, spec, tool.return_char_limit)


@dataclass(frozen=True)
class McpCalls:
    connections: Connections
    sessionmaker: async_sessionmaker[AsyncSession]
    organization_id: str
    servers: Mapping[str, ServerState]  # by id: the servers of the turn's MCP tools
    timeout: float
    recorded: dict[str, str] = field(default_factory=dict)  # health written during this turn, by server id

    async def run(self, tool: McpTool, call: ToolCall) -> ToolOutcome:
        try:
            arguments = parse_arguments(call)
            heartbeat = bool(arguments.pop("request_heartbeat", False))
            _check_arguments(tool, arguments)
        except ValueError as error:
            return ToolOutcome.invalid(str(error))
        state = self.servers.get(tool.server_id)
        if state is None:  # deleted since the turn read the agent's tools
            return ToolOutcome("error", f"The MCP server of {tool.name} no longer exists.", heartbeat=heartbeat)
        started = time.monotonic()
        try:
            result = await self.connections.call_tool(state.config, tool.name, arguments, timeout=self.timeout)
        except McpUnavailable as failed:
            metrics.MCP_CALL_SECONDS.labels("unavailable").observe(time.monotonic() - started)
            await self._record(tool.server_id, state, str(failed))
            return ToolOutcome("error", f"MCP server {state.name!r} failed: {failed}", heartbeat=heartbeat)
        metrics.MCP_CALL_SECONDS.labels("error" if result.is_error else "success").observe(time.monotonic() - started)
        await self._record(tool.server_id, state, None)
        clipped = clip(result.text, tool.return_char_limit)
        return ToolOutcome("error" if result.is_error else "success", clipped, heartbeat=heartbeat)

    async def _record(self, server_id: str, state: ServerState, error: str | None) -> None:
        status = "error" if error else "connected"
        if status == self.recorded.get(server_id, state.status) and error is None:
            return
        async with transaction(self.sessionmaker, self.organization_id) as session:
            await mcpservers.record_status(session, server_id, error)
        self.recorded[server_id] = status


def _check_arguments(tool: McpTool, arguments: dict[str, Any]) -> None:
    """Required arguments must be there; unknown ones only where the schema forbids extras."""
    parameters = tool.spec.parameters
    accepted = list(parameters.get("properties") or {})
    if parameters.get("additionalProperties") is not False:
        accepted += [name for name in arguments if name not in accepted]
    check_names(tool.name, arguments, accepted, parameters.get("required") or ())


def tool_call(tool: McpTool, arguments: Mapping[str, Any]) -> ToolCall:
    """A call made by a client (not a model), as the model's calls look."""
    return ToolCall(f"call-{tool.server_id}-{tool.name}", tool.name, json.dumps(dict(arguments)))


async def mcp_calls(
    session: AsyncSession,
    connections: Connections,
    sessionmaker: async_sessionmaker[AsyncSession],
    attached: Sequence[Tool],
    timeout: float,
) -> McpCalls | None:
    """The MCP calls of a turn whose agent has these tools, with its servers read in the turn's
    first transaction; None (and no statement) for an agent without MCP tools."""
    server_ids = sorted({tool.mcp_server_id for tool in attached if tool.mcp_server_id is not None})
    if not server_ids:
        return None
    organization_id = next(tool.organization_id for tool in attached if tool.mcp_server_id is not None)
    servers = await mcpservers.states_of(session, server_ids)
    return McpCalls(connections, sessionmaker, organization_id or "", servers, timeout)

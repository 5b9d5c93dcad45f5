"""The SDK's side of the port's requests: a link to a server, and what goes through its session.

connections.py imports this module on a process's first MCP request rather than at start: the `mcp`
SDK (its server side included, which its package loads too) takes most of a second of CPU and about
28 MiB to import, which a server whose organizations use no MCP server should not pay, and which
`memvm serve` would otherwise pay before its first answer."""

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from memvm.mcpclient.link import Link
from memvm.mcpclient.results import call_result, error_result, remote_tool
from memvm.mcpclient.transports import transport_for

__all__ = ["Link", "MCPError", "all_tools", "call_result", "error_result", "remote_tool", "tool_call", "transport_for"]


def tool_call(name: str, arguments: dict[str, Any]) -> Callable[[ClientSession], Awaitable[types.CallToolResult]]:
    async def call(session: ClientSession) -> types.CallToolResult:
        result = await session.call_tool(name, arguments)
        assert isinstance(result, types.CallToolResult)  # the SDK raises on the other kinds
        return result

    return call


async def all_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of tools/list."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += page.tools
        if not (cursor := page.next_cursor):
            return tools

"""Servers over the network, in-process with the SDK's transports: streamable HTTP and SSE."""

import asyncio
from collections.abc import Iterator

import pytest

from memvm.mcpclient.types import McpUnavailable, ServerConfig
from tests.support.mcp.http_server import HttpServer, served_http


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    with served_http() as server:
        yield server


@pytest.mark.parametrize("server_type", ["streamable_http", "sse"])
async def test_lists_and_calls_tools(connect, http_server, server_type):
    connections = await connect()
    url = http_server.streamable_url if server_type == "streamable_http" else http_server.sse_url
    config = ServerConfig(f"mcp-{server_type}", server_type, url=url, headers={"Authorization": "Bearer test-token"})

    tools = await connections.list_tools(config)
    added = await connections.call_tool(config, "add", {"a": 40, "b": 2})
    failed = await connections.call_tool(config, "fail", {})
    again = await connections.call_tool(config, "echo", {"text": "same session"})

    assert {tool.name for tool in tools} == {"echo", "add", "slow", "big", "fail", "whoami"}
    assert (added.text, added.is_error) == ("42", False)
    assert failed.is_error
    assert again.text == "same session"


async def test_a_server_that_goes_away_and_comes_back(connect):
    connections = await connect()
    with served_http() as server:
        config = ServerConfig("mcp-restarted", "streamable_http", url=server.streamable_url)
        await connections.list_tools(config)
        port = server.port

    with pytest.raises(McpUnavailable):
        await connections.call_tool(config, "echo", {"text": "anyone?"})
    with pytest.raises(McpUnavailable, match="next attempt in 1 s"):
        await connections.list_tools(config)

    with served_http(port):
        await asyncio.sleep(1.1)
        result = await connections.call_tool(config, "echo", {"text": "back"})

    assert result.text == "back"


async def test_nothing_listening(connect):
    connections = await connect(mcp_connect_timeout_seconds=3)
    with served_http() as server:
        url = server.sse_url  # a port that was free, and is again

    with pytest.raises(McpUnavailable, match="MCP server mcp-gone"):
        await connections.list_tools(ServerConfig("mcp-gone", "sse", url=url))

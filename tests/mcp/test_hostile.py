"""Servers that hang, crash, babble or flood: each ends as McpUnavailable within its timeout, the
server is killed, memvm's memory stays bounded, and other servers keep answering meanwhile."""

import asyncio
import time

import psutil
import pytest

from memvm.mcpclient.types import McpUnavailable
from tests.mcp.conftest import hostile_server, stdio_config, tools_server

SHORT = 1.5  # seconds: the timeout under test
SLACK = 3.0  # seconds: start-up and teardown on a loaded machine (2 cores, shared)


async def unavailable_within(limit: float, step) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(McpUnavailable) as raised:
        await step
    elapsed = time.monotonic() - started
    assert elapsed < limit, f"took {elapsed:.1f} s: {raised.value}"
    return str(raised.value), elapsed


async def test_a_server_that_never_answers_initialize(connect):
    connections = await connect(mcp_connect_timeout_seconds=SHORT)

    reason, _ = await unavailable_within(SHORT + SLACK, connections.list_tools(hostile_server("hang-initialize")))

    assert "connect and initialize took longer than 1.5 s" in reason


async def test_a_server_that_writes_garbage(connect):
    connections = await connect(mcp_connect_timeout_seconds=SHORT)

    reason, _ = await unavailable_within(SHORT + SLACK, connections.list_tools(hostile_server("garbage")))

    assert "lines that are not JSON-RPC" in reason


async def test_a_server_that_floods_one_line(connect):
    connections = await connect(mcp_max_message_bytes=1 << 20, mcp_connect_timeout_seconds=4)
    before = psutil.Process().memory_info().rss

    reason, _ = await unavailable_within(4 + SLACK, connections.list_tools(hostile_server("flood")))

    grown = psutil.Process().memory_info().rss - before
    assert grown < 32 << 20, f"memvm grew by {grown >> 20} MiB reading a 64 MiB line"
    assert f"sent a message over {1 << 20} bytes" in reason


async def test_a_server_that_crashes_on_a_call(connect):
    connections = await connect()
    config = hostile_server("crash-after-initialize")
    await connections.list_tools(config)

    reason, _ = await unavailable_within(5, connections.call_tool(config, "echo", {"text": "hi"}))

    assert "exited with status 1: crashing on purpose" in reason


async def test_a_tool_that_never_returns(connect):
    connections = await connect(mcp_call_timeout_seconds=30)
    config = hostile_server("slow-tool")
    await connections.list_tools(config)

    reason, elapsed = await unavailable_within(SHORT + SLACK, connections.call_tool(config, "sleep", {}, timeout=SHORT))

    assert "tools/call took longer than 1.5 s" in reason
    assert elapsed >= SHORT


async def test_a_hung_server_does_not_delay_another(connect):
    # The fixture's 10 s connect timeout: the healthy server's own start (a sandboxed Python importing
    # the MCP SDK) took over 3 s once on a loaded 2-core host. Waiting on the hung one would cost the
    # whole timeout, so a call that returns within a fraction of it was not held up.
    connections = await connect()
    healthy = tools_server()
    await connections.list_tools(healthy)
    hung = asyncio.create_task(connections.list_tools(hostile_server("hang-initialize")))
    await asyncio.sleep(0.5)  # the hung server is connecting

    started = time.monotonic()
    result = await connections.call_tool(healthy, "echo", {"text": "still here"})
    elapsed = time.monotonic() - started

    assert result.text == "still here" and elapsed < 2.0
    assert not hung.done()
    hung.cancel()  # its own timeout is test_a_server_that_never_answers_initialize's subject
    with pytest.raises(asyncio.CancelledError):
        await hung


async def test_back_off_fails_fast_then_reconnects(connect):
    connections = await connect()
    config = hostile_server("crash-after-initialize")
    await connections.list_tools(config)
    with pytest.raises(McpUnavailable):
        await connections.call_tool(config, "echo", {"text": "crash"})

    fast, elapsed = await unavailable_within(0.2, connections.list_tools(config))
    await asyncio.sleep(1.1)
    tools = await connections.list_tools(config)

    assert "unavailable, next attempt in 1 s: exited with status 1" in fast
    assert [tool.name for tool in tools] == ["echo"]


async def test_back_off_doubles_and_an_edited_config_skips_it(connect, tmp_path):
    connections = await connect()
    broken = stdio_config("mcp-broken", str(tmp_path / "no-such-server.py"))  # python exits at once
    with pytest.raises(McpUnavailable, match="exited with status 2: .*No such file"):
        await connections.list_tools(broken)
    await asyncio.sleep(1.1)
    with pytest.raises(McpUnavailable, match="exited with status 2"):
        await connections.list_tools(broken)

    doubled, _ = await unavailable_within(0.2, connections.list_tools(broken))
    fixed = tools_server(broken.server_id)  # the same server, edited to a working command
    tools = await connections.list_tools(fixed)

    assert "unavailable, next attempt in 2 s: exited with status 2" in doubled
    assert "echo" in {tool.name for tool in tools}


async def test_a_secret_the_server_echoes_is_not_passed_on(connect):
    connections = await connect()
    token = "sk-test-4f1c9a"
    leaky = stdio_config(
        "mcp-leaky", "-c", "import os, sys; sys.exit('bad key ' + os.environ['API_KEY'])", env={"API_KEY": token}
    )

    with pytest.raises(McpUnavailable) as raised:
        await connections.list_tools(leaky)

    assert "exited with status 1: bad key [redacted]" in str(raised.value)
    assert token not in str(raised.value)

"""MCP servers through the official SDK against a real `memvm serve`: every mcp_servers method of
letta-client 1.12.1 on a stdio server built with the MCP SDK (run in memvm's sandbox), its tool
attached to an agent and called in a turn, Letta Code's agent-scoped routes, and a server that
crashes on a call. Bad input, secrets and timeouts: tests/api/test_mcp_servers.py; the port and
hostile servers: tests/mcp/."""

from letta_client import AsyncLetta, NotFoundError
from letta_client.types import StdioMcpServer, Tool, ToolReturnMessage

from tests.support.mcp_api import stdio_body
from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import new_agent, unique


async def _stdio_server(letta: AsyncLetta, script: str = "stdio_server.py", *args: str) -> StdioMcpServer:
    body = stdio_body(unique("tools"), script, *args)
    server = await letta.mcp_servers.create(server_name=body["server_name"], config=body["config"])
    assert isinstance(server, StdioMcpServer)
    return server


async def test_every_mcp_servers_method_on_a_stdio_server(letta: AsyncLetta):
    server = await _stdio_server(letta)
    assert server.id.startswith("mcp_server-") and server.mcp_server_type == "stdio"
    assert getattr(server, "status", None) == "connected"
    assert server.id in [listed.id for listed in await letta.mcp_servers.list()]
    assert (await letta.mcp_servers.retrieve(server.id)).server_name == server.server_name

    tools = {tool.name: tool for tool in await letta.mcp_servers.tools.list(server.id)}
    assert {"echo", "add", "whoami"} <= set(tools) and all(isinstance(tool, Tool) for tool in tools.values())
    echo = await letta.mcp_servers.tools.retrieve(tools["echo"].id, mcp_server_id=server.id)
    assert echo.json_schema["parameters"]["required"] == ["text"]
    ran = await letta.mcp_servers.tools.run(tools["add"].id, mcp_server_id=server.id, args={"a": 20, "b": 22})
    assert (ran.status, ran.func_return) == ("success", "42")

    renamed = unique("renamed")
    updated = await letta.mcp_servers.update(
        server.id, server_name=renamed, config={"mcp_server_type": "stdio", "env": {"MODE": "x"}}
    )
    assert (updated.server_name, updated.env) == (renamed, {"MODE": "********"})
    refreshed = await letta.mcp_servers.refresh(server.id)
    assert refreshed == {"deleted": [], "updated": [], "added": [], "skipped": {}}

    await letta.mcp_servers.delete(server.id)
    try:
        await letta.mcp_servers.retrieve(server.id)
        raise AssertionError("the deleted server is still there")
    except NotFoundError:
        pass


async def test_an_agent_calls_an_mcp_tool_in_a_turn_and_letta_codes_routes_see_the_server(letta: AsyncLetta, llm: ScriptedLLM):
    server = await _stdio_server(letta)
    tools = {tool.name: tool for tool in await letta.mcp_servers.tools.list(server.id)}
    agent = await new_agent(letta)
    await letta.agents.tools.attach(tools["echo"].id, agent_id=agent.id)
    llm.reply(tool_calls=[("echo", {"text": "from the jail"})]).reply("done")

    response = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "echo it"}])

    [returned] = [m for m in response.messages if isinstance(m, ToolReturnMessage)]
    assert (returned.status, returned.tool_return) == ("success", "from the jail")
    servers = await letta.get(f"/v1/agents/{agent.id}/mcp-servers", cast_to=object)
    assert server.id in [item["id"] for item in servers]  # type: ignore[union-attr]
    listed = await letta.get(f"/v1/agents/{agent.id}/mcp-servers/{server.id}/tools", cast_to=object)
    assert "echo" in [item["name"] for item in listed]  # type: ignore[union-attr]
    found = await letta.post(
        f"/v1/agents/{agent.id}/mcp-servers/tools/search",
        body={"query": "echo", "search_mode": "fts", "limit": 5},
        cast_to=object,
    )
    assert found[0]["tool"]["name"] == "echo"  # type: ignore[index]
    run = await letta.post(
        f"/v1/agents/{agent.id}/mcp-servers/{server.id}/tools/{tools['add'].id}/run",
        body={"args": {"a": 1, "b": 2}},
        cast_to=object,
    )
    assert (run["status"], run["func_return"]) == ("success", "3")  # type: ignore[index]
    await letta.mcp_servers.delete(server.id)  # its tool names are free again for the next test's server


async def test_a_server_that_crashes_on_a_call_gives_an_error_result_and_its_status(letta: AsyncLetta):
    server = await _stdio_server(letta, "hostile_server.py", "crash-after-initialize")
    [tool] = await letta.mcp_servers.tools.list(server.id)

    ran = await letta.mcp_servers.tools.run(tool.id, mcp_server_id=server.id, args={"text": "hi"})

    assert ran.status == "error" and "exited" in ran.func_return
    health = await letta.mcp_servers.retrieve(server.id)
    assert getattr(health, "status", None) == "error" and "exited" in str(getattr(health, "last_error", ""))

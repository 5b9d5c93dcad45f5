"""MCP servers over the API with real servers (the SDK's own server side): a stdio server in the
sandbox and a streamable-HTTP one bring their tools, agents call them in turns, secrets never come
back, and a server that fails gives an error result and a status, never a stuck turn."""

import asyncio
import time

import pytest

from memvm.mcpservers.schemas import MASK
from tests.support.api import app_client, create_agent
from tests.support.folder_files import call
from tests.support.mcp.http_server import served_http
from tests.support.mcp_api import add_server, attach, server_tools, stdio_body
from tests.support.metrics import samples, value
from tests.support.sandbox import require_sandbox

MODEL = "openai/gpt-4o-mini"
TEST_TOOLS = {"echo", "add", "slow", "big", "fail", "whoami"}


@pytest.fixture
async def mcp_client(settings):
    """The app with short MCP timeouts, on a host where the sandbox runs."""
    tuned = settings.model_copy(
        update={"mcp_call_timeout_seconds": 2, "mcp_list_timeout_seconds": 5, "mcp_connect_timeout_seconds": 10}
    )
    await require_sandbox(tuned)
    async with app_client(tuned) as client:
        yield client


async def test_a_stdio_server_brings_its_tools_and_an_agent_calls_one_in_a_turn(mcp_client, llm, db):
    server = await add_server(mcp_client, stdio_body())
    assert (server["status"], server["last_error"], server["mcp_server_type"]) == ("connected", None, "stdio")
    tools = await server_tools(mcp_client, server["id"])
    assert set(tools) == TEST_TOOLS
    add = tools["add"]
    assert (add["tool_type"], add["tags"], add["metadata"]["mcp"]) == (
        "external_mcp",
        ["mcp:tools"],
        {"server_name": "tools", "server_id": server["id"]},
    )
    assert add["json_schema"]["parameters"]["required"] == ["a", "b"]
    agent = await create_agent(mcp_client, model=MODEL)
    await attach(mcp_client, agent["id"], add["id"])

    [returned] = await call(mcp_client, llm, agent["id"], ("add", {"a": 2, "b": 40}))

    assert (returned["status"], returned["tool_return"]) == ("success", "42")
    offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
    assert "add" in offered
    stored = await db.fetchval("SELECT content FROM message WHERE role = 'tool' AND tool_name = 'add'")
    assert stored == "42"


async def test_a_tool_error_a_bad_call_and_a_long_result_are_the_agents_to_read(mcp_client, llm):
    server = await add_server(mcp_client, stdio_body())
    tools = await server_tools(mcp_client, server["id"])
    limited = await mcp_client.patch(f"/v1/tools/{tools['big']['id']}", json={"return_char_limit": 100})
    assert limited.status_code == 200, limited.text
    agent = await create_agent(mcp_client, model=MODEL)
    for name in ("fail", "add", "big"):
        await attach(mcp_client, agent["id"], tools[name]["id"])

    failed, bad, big = await call(mcp_client, llm, agent["id"], ("fail", {}), ("add", {"a": 1}), ("big", {"n": 5000}))

    assert failed["status"] == "error" and "Error executing tool fail" in failed["tool_return"]
    assert bad["status"] == "error" and "missing required argument(s) b" in bad["tool_return"]
    assert big["status"] == "success" and big["tool_return"].startswith("x" * 100 + "\n… [truncated")
    health = (await mcp_client.get(f"/v1/mcp-servers/{server['id']}")).json()
    assert health["status"] == "connected"  # a tool's own error is not the server's


async def test_a_call_that_hangs_ends_in_an_error_result_and_the_servers_status(mcp_client, llm):
    server = await add_server(mcp_client, stdio_body())
    tools = await server_tools(mcp_client, server["id"])
    agent = await create_agent(mcp_client, model=MODEL)
    await attach(mcp_client, agent["id"], tools["slow"]["id"])

    before = samples((await mcp_client.get("/metrics")).text)
    started = time.monotonic()
    [returned] = await call(mcp_client, llm, agent["id"], ("slow", {"seconds": 30}))
    after = samples((await mcp_client.get("/metrics")).text)

    assert time.monotonic() - started < 10
    moved = [value(scraped, "memvm_mcp_call_seconds_count", outcome="unavailable") for scraped in (before, after)]
    assert moved[1] - moved[0] == 1
    assert returned["status"] == "error" and "tools" in returned["tool_return"] and "2" in returned["tool_return"]
    health = (await mcp_client.get(f"/v1/mcp-servers/{server['id']}")).json()
    assert health["status"] == "error" and health["last_error"] and health["checked_at"]


async def test_a_hung_server_does_not_hold_up_another_agents_turn(mcp_client, llm):
    server = await add_server(mcp_client, stdio_body())
    tools = await server_tools(mcp_client, server["id"])
    stuck, other = await create_agent(mcp_client, model=MODEL), await create_agent(mcp_client, model=MODEL)
    await attach(mcp_client, stuck["id"], tools["slow"]["id"])
    await attach(mcp_client, other["id"], tools["echo"]["id"])

    def answer(body: dict) -> dict:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"content": "done"}
        name = body["tools"][-1]["function"]["name"] if body.get("tools") else ""
        offered = {tool["function"]["name"] for tool in body.get("tools") or ()}
        if "slow" in offered:
            return {"tool_calls": [("slow", {"seconds": 30})]}
        return {"tool_calls": [("echo", {"text": "hi"})]} if "echo" in offered else {"content": name}

    llm.respond(answer)
    finished: dict[str, float] = {}

    async def turn(agent_id: str) -> None:
        response = await mcp_client.post(f"/v1/agents/{agent_id}/messages", json={"input": "go"})
        assert response.status_code == 200, response.text
        finished[agent_id] = time.monotonic()

    started = time.monotonic()
    slow_turn = asyncio.create_task(turn(stuck["id"]))
    await asyncio.sleep(0.3)  # the slow call is under way
    await turn(other["id"])
    await slow_turn

    # The stuck turn ends only at its call's 2 s timeout; the other one does not wait for that.
    assert finished[other["id"]] < finished[stuck["id"]] - 1.0 and finished[stuck["id"]] - started >= 2.0


async def test_secrets_are_stored_but_never_answered_and_a_masked_value_keeps_the_stored_one(client, db):
    body = {
        "server_name": "remote",
        "config": {
            "mcp_server_type": "streamable_http",
            "server_url": "http://127.0.0.1:9/mcp",
            "auth_header": "X-Api-Key",
            "auth_token": "tok-SECRET-1",
            "custom_headers": {"X-Team": "hdr-SECRET-2"},
        },
    }
    created = (await client.post("/v1/mcp-servers/", json=body)).json()
    assert (created["auth_token"], created["custom_headers"]) == (MASK, {"X-Team": MASK})
    update = {
        "config": {
            "mcp_server_type": "streamable_http",
            "auth_token": MASK,
            "custom_headers": {"X-Team": MASK, "X-New": "n-SECRET-3"},
        }
    }
    updated = await client.patch(f"/v1/mcp-servers/{created['id']}", json=update)
    assert updated.status_code == 200, updated.text

    answers = [created, updated.json(), (await client.get(f"/v1/mcp-servers/{created['id']}")).json()]
    answers += (await client.get("/v1/mcp-servers/")).json()
    assert not any("SECRET" in str(answer) for answer in answers)
    secrets = await db.fetchval("SELECT secrets::text FROM mcp_server")
    assert all(secret in secrets for secret in ("tok-SECRET-1", "hdr-SECRET-2", "n-SECRET-3"))
    assert created["status"] == "error" and "SECRET" not in (created["last_error"] or "")


async def test_an_unreachable_server_is_created_with_its_error_and_refresh_is_a_503(client):
    body = {"server_name": "down", "config": {"mcp_server_type": "streamable_http", "server_url": "http://127.0.0.1:9/mcp"}}
    server = (await client.post("/v1/mcp-servers/", json=body)).json()
    assert server["status"] == "error" and server["last_error"]
    refreshed = await client.patch(f"/v1/mcp-servers/{server['id']}/refresh")
    assert refreshed.status_code == 503 and "could not list its tools" in refreshed.json()["detail"]
    assert (await client.get(f"/v1/mcp-servers/{server['id']}/tools")).json() == []


async def test_a_streamable_http_server_lists_and_runs_its_tools(client):
    with served_http() as http:
        body = {"server_name": "web", "config": {"mcp_server_type": "streamable_http", "server_url": http.streamable_url}}
        server = await add_server(client, body)
        tools = await server_tools(client, server["id"])
        run = await client.post(
            f"/v1/mcp-servers/{server['id']}/tools/{tools['echo']['id']}/run", json={"args": {"text": "hello"}}
        )

    assert server["status"] == "connected" and set(tools) == TEST_TOOLS
    assert run.status_code == 200, run.text
    assert (run.json()["status"], run.json()["func_return"]) == ("success", "hello")


async def test_deleting_a_server_deletes_its_tools_and_detaches_them(mcp_client):
    server = await add_server(mcp_client, stdio_body())
    tools = await server_tools(mcp_client, server["id"])
    agent = await create_agent(mcp_client, model=MODEL)
    await attach(mcp_client, agent["id"], tools["echo"]["id"])

    deleted = await mcp_client.delete(f"/v1/mcp-servers/{server['id']}")

    assert deleted.status_code == 204
    assert (await mcp_client.get(f"/v1/mcp-servers/{server['id']}")).status_code == 404
    assert (await mcp_client.get(f"/v1/tools/{tools['echo']['id']}")).status_code == 404
    names = {tool["name"] for tool in (await mcp_client.get(f"/v1/agents/{agent['id']}/tools")).json()}
    assert "echo" not in names


@pytest.mark.parametrize(
    "config, fix",
    [
        ({"mcp_server_type": "sse", "server_url": "ftp://host/sse"}, "http:// or https://"),
        ({"mcp_server_type": "stdio", "command": "x", "args": [], "env": {"1BAD": "v"}}, "valid variable name"),
        (
            {"mcp_server_type": "streamable_http", "server_url": "http://h/mcp", "custom_headers": {"Bad Header": "v"}},
            "header name",
        ),
        ({"mcp_server_type": "stdio", "command": "", "args": []}, "command"),
    ],
)
async def test_a_bad_config_is_a_422_that_names_the_problem_and_stores_nothing(client, db, config, fix):
    response = await client.post("/v1/mcp-servers/", json={"server_name": "bad", "config": config})
    assert response.status_code == 422 and fix in response.text
    assert await db.fetchval("SELECT count(*) FROM mcp_server") == 0


async def test_a_duplicate_name_is_a_409_and_a_type_change_a_400(client):
    body = {"server_name": "one", "config": {"mcp_server_type": "sse", "server_url": "http://127.0.0.1:9/sse"}}
    server = (await client.post("/v1/mcp-servers/", json=body)).json()
    again = await client.post("/v1/mcp-servers/", json=body)
    assert again.status_code == 409 and "already has an MCP server named 'one'" in again.json()["detail"]
    retyped = await client.patch(f"/v1/mcp-servers/{server['id']}", json={"config": {"mcp_server_type": "stdio", "command": "x"}})
    assert retyped.status_code == 400 and "cannot change" in retyped.json()["detail"]
    assert (await client.get(f"/v1/mcp-servers/{server['id']}")).json()["mcp_server_type"] == "sse"

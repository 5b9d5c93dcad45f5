"""The routes Letta Code calls besides conversations (issue 25): an agent's secrets (names only),
MCP servers (the organization's: none yet here; tests/api/test_mcp_servers.py adds some) and
repositories (none), and POST /v1/tools/add-base-tools (the shared built-ins)."""

from memvm.tools.builtin import BUILTIN_SPECS
from tests.support.api import create_agent

MISSING_AGENT = "agent-00000000-0000-4000-8000-000000000000"


async def test_secrets_lists_the_agents_variables_masked(client):
    agent = await create_agent(client, secrets={"TOKEN": "s3cret", "API_KEY": "k3y"})

    response = await client.get(f"/v1/agents/{agent['id']}/secrets")

    assert response.status_code == 200, response.text
    assert response.json() == [
        {"agent_id": agent["id"], "key": "API_KEY", "value": "********"},
        {"agent_id": agent["id"], "key": "TOKEN", "value": "********"},
    ]
    assert "s3cret" not in response.text and "k3y" not in response.text


async def test_a_new_organizations_mcp_servers_and_the_repositories_are_empty(client):
    agent = await create_agent(client)

    servers = await client.get(f"/v1/agents/{agent['id']}/mcp-servers")
    repositories = await client.get(f"/v1/agents/{agent['id']}/repositories")

    assert (servers.status_code, servers.json()) == (200, [])
    assert (repositories.status_code, repositories.json()) == (200, {"repositories": []})


async def test_an_unknown_agent_is_a_404_on_each_route(client):
    for route in ("secrets", "mcp-servers", "repositories"):
        response = await client.get(f"/v1/agents/{MISSING_AGENT}/{route}")

        assert response.status_code == 404, (route, response.text)
        assert MISSING_AGENT in response.json()["detail"]


async def test_add_base_tools_returns_the_built_ins_and_changes_nothing(client):
    before = (await client.get("/v1/tools/")).json()

    response = await client.post("/v1/tools/add-base-tools")

    assert response.status_code == 200, response.text
    assert [tool["name"] for tool in response.json()] == list(BUILTIN_SPECS)
    assert {"web_search", "fetch_webpage", "send_message", "archival_memory_search"} <= set(BUILTIN_SPECS)
    assert (await client.get("/v1/tools/")).json() == before

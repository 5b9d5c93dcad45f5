"""An agent's MCP tools in agent files: exported with their servers (how to reach them, never their
secrets); imported by attaching the organization's tool of that server and name, else left out with
a note."""

import json

from pydantic import SecretStr

from memvm.db.uow import transaction
from memvm.mcpclient.types import RemoteTool
from memvm.mcpservers import service
from tests.support.agentfiles import export_file
from tests.support.api import app_client, create_agent

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
ADMIN = {"Authorization": "Bearer admin-key"}


async def _server_with_a_tool(client, headers: dict[str, str], sessionmaker, organization_id: str) -> str:
    body = {
        "server_name": "wiki",
        "config": {"mcp_server_type": "sse", "server_url": "http://127.0.0.1:9/sse", "auth_token": "tok-SECRET"},
    }
    server = (await client.post("/v1/mcp-servers/", json=body, headers=headers)).json()
    async with transaction(sessionmaker, organization_id) as session:
        await service.apply_tools(session, server["id"], [RemoteTool("lookup", "Look a page up", SCHEMA)])
    tools = (await client.get(f"/v1/mcp-servers/{server['id']}/tools", headers=headers)).json()
    return tools[0]["id"]


async def _import(client, file: dict, headers: dict[str, str]) -> dict:
    upload = {"file": ("agent.af", json.dumps(file).encode(), "application/json")}
    response = await client.post("/v1/agents/import", files=upload, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_mcp_tools_travel_by_server_and_name_and_secrets_stay_home(settings, llm, db, sessionmaker):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr("admin-key")})) as client:
        keys = {}
        for organization in ("a", "b"):
            created = await client.post("/v1/admin/api-keys", json={"organization": organization}, headers=ADMIN)
            keys[organization] = {"Authorization": f"Bearer {created.json()['key']}"}
        a_org = await db.fetchval("SELECT id FROM organization WHERE name = 'a'")
        tool_id = await _server_with_a_tool(client, keys["a"], sessionmaker, a_org)
        client.headers.update(keys["a"])
        agent = await create_agent(client)
        assert (await client.patch(f"/v1/agents/{agent['id']}/tools/attach/{tool_id}")).status_code == 200

        file = await export_file(client, agent["id"], legacy=False)
        again = await _import(client, file, keys["a"])
        elsewhere = await _import(client, file, keys["b"])
        again_tools = (await client.get(f"/v1/agents/{again['agent_ids'][0]}/tools", headers=keys["a"])).json()
        elsewhere_tools = (await client.get(f"/v1/agents/{elsewhere['agent_ids'][0]}/tools", headers=keys["b"])).json()

    [server] = file["mcp_servers"]
    assert (server["server_name"], server["server_type"], server["server_url"]) == ("wiki", "sse", "http://127.0.0.1:9/sse")
    assert "SECRET" not in json.dumps(file)
    [exported] = [tool for tool in file["tools"] if tool["name"] == "lookup"]
    assert exported["tool_type"] == "external_mcp"
    assert tool_id in [tool["id"] for tool in again_tools]
    assert "lookup" not in [tool["name"] for tool in elsewhere_tools]
    assert any("'lookup' of MCP server 'wiki' was left out" in note for note in elsewhere["notes"])

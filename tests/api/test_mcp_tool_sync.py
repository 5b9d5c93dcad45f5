"""A server's tools/list becoming tool rows (mcpservers.service.apply_tools), without a server: new
tools are added, changed ones updated, gone ones deleted and detached, and a tool memvm cannot
offer a model is skipped with the reason, in one transaction."""

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.mcpclient.types import RemoteTool
from memvm.mcpservers import service
from memvm.mcpservers.schemas import McpServerCreate
from tests.support.api import create_agent

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


async def _server(sessionmaker, name: str = "docs") -> str:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        data = McpServerCreate.model_validate({"server_name": name, "config": {"server_url": "http://127.0.0.1:9/sse"}})
        return (await service.create_server(session, data)).id


async def _apply(sessionmaker, server_id: str, *remote: RemoteTool):
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        return await service.apply_tools(session, server_id, remote)


async def test_a_refresh_adds_updates_and_deletes_what_the_server_lists(client, db, sessionmaker):
    server_id = await _server(sessionmaker)
    first = await _apply(sessionmaker, server_id, RemoteTool("search", "Find", OBJECT), RemoteTool("fetch", "Get", OBJECT))
    fetch_id = await db.fetchval("SELECT id FROM tool WHERE name = 'fetch'")
    agent = await create_agent(client)
    assert (await client.patch(f"/v1/agents/{agent['id']}/tools/attach/{fetch_id}")).status_code == 200

    again = await _apply(sessionmaker, server_id, RemoteTool("search", "Find", OBJECT), RemoteTool("fetch", "Get", OBJECT))
    changed = await _apply(sessionmaker, server_id, RemoteTool("search", "Find pages", OBJECT), RemoteTool("list", "All", {}))

    assert (first.added, first.updated, first.deleted) == (["search", "fetch"], [], [])
    assert (again.added, again.updated, again.deleted) == ([], [], [])
    assert (changed.added, changed.updated, changed.deleted) == (["list"], ["search"], ["fetch"])
    rows = await db.fetch(
        "SELECT name, description, json_schema->'parameters' AS p FROM tool WHERE mcp_server_id = $1", server_id
    )
    assert {row["name"]: row["description"] for row in rows} == {"search": "Find pages", "list": "All"}
    assert await db.fetchval("SELECT count(*) FROM agent_tool WHERE tool_id = $1", fetch_id) == 0


async def test_tools_a_model_cannot_take_are_skipped_with_the_reason(client, sessionmaker):
    clash = await client.post(
        "/v1/tools/",
        json={"source_code": "def mine(q: str) -> str:\n    '''Mine.\n\n    Args:\n        q: q\n    '''\n    return q\n"},
    )
    assert clash.status_code == 200, clash.text
    server_id = await _server(sessionmaker)

    result = await _apply(
        sessionmaker,
        server_id,
        RemoteTool("has space", "", OBJECT),
        RemoteTool("send_message", "", OBJECT),
        RemoteTool("mine", "", OBJECT),
        RemoteTool("arrayed", "", {"type": "array"}),
        RemoteTool("fine", "", OBJECT),
    )

    assert result.added == ["fine"]
    assert set(result.skipped) == {"has space", "send_message", "mine", "arrayed"}
    assert "valid function name" in result.skipped["has space"]
    assert "built-in" in result.skipped["send_message"]
    assert clash.json()["id"] in result.skipped["mine"]
    assert "JSON object schema" in result.skipped["arrayed"]


async def test_renaming_a_server_retags_its_tools(client, db, sessionmaker):
    server_id = await _server(sessionmaker)
    await _apply(sessionmaker, server_id, RemoteTool("search", "Find", OBJECT))

    renamed = await client.patch(
        f"/v1/mcp-servers/{server_id}", json={"server_name": "wiki", "config": {"mcp_server_type": "sse"}}
    )

    assert renamed.status_code == 200, renamed.text
    row = await db.fetchrow("SELECT tags, metadata->'mcp'->>'server_name' AS server FROM tool WHERE name = 'search'")
    assert (row["tags"], row["server"]) == (["mcp:wiki"], "wiki")


async def test_an_mcp_tools_schema_is_the_servers_not_the_clients(client, db, sessionmaker):
    server_id = await _server(sessionmaker)
    await _apply(sessionmaker, server_id, RemoteTool("search", "Find", OBJECT))
    tool_id = await db.fetchval("SELECT id FROM tool WHERE name = 'search'")

    edited = await client.patch(f"/v1/tools/{tool_id}", json={"json_schema": {"name": "search", "parameters": {}}})
    limited = await client.patch(f"/v1/tools/{tool_id}", json={"return_char_limit": 500, "default_requires_approval": True})
    replaced = await client.put(
        "/v1/tools/",
        json={"source_code": "def search(q: str) -> str:\n    '''S.\n\n    Args:\n        q: q\n    '''\n    return q\n"},
    )

    assert edited.status_code == 400 and "refresh" in edited.json()["detail"]
    assert limited.status_code == 200 and limited.json()["return_char_limit"] == 500
    assert replaced.status_code == 409 and "MCP server" in replaced.json()["detail"]
    assert await db.fetchval("SELECT json_schema->'parameters' FROM tool WHERE id = $1", tool_id) is not None

"""Organizations are isolated on every route: a walk over every operation in the OpenAPI document
with organization B's key against organization A's ids. A new route that forgets to scope, or that
this walk does not know how to call, fails here."""

import json
import re

import httpx
import pytest
from pydantic import SecretStr

from tests.support.api import app_client

ADMIN_KEY = "admin-secret-for-tests"
ARCHIVAL = {"tools": ["archival_memory_insert", "archival_memory_search"], "model": "openai/scripted-model"}

# A valid body for every operation that needs one, so the request gets past validation to the lookup.
# Ids are filled in from the objects under test: {agent}, {block}, {archive} (always organization A's).
BODIES = {
    ("POST", "/v1/admin/api-keys"): {"organization": "c", "name": "x"},
    ("POST", "/v1/agents/"): {"block_ids": ["{block}"]},
    ("PATCH", "/v1/agents/{agent_id}"): {"description": "taken over"},
    ("PATCH", "/v1/agents/{agent_id}/core-memory/blocks/{block_label}"): {"value": "taken over"},
    ("POST", "/v1/blocks/"): {"label": "mine", "value": "x"},
    ("PATCH", "/v1/blocks/{block_id}"): {"value": "taken over"},
    ("POST", "/v1/blocks/{block_id}/restore"): {"version": 1},
    ("POST", "/v1/agents/{agent_id}/messages"): {"input": "hi"},
    ("POST", "/v1/agents/{agent_id}/messages/stream"): {"input": "hi"},
    ("POST", "/v1/agents/{agent_id}/archival-memory"): {"text": "planted"},
    ("POST", "/v1/passages/search"): {"query": "garden", "agent_id": "{agent}"},
    ("POST", "/v1/archives/"): {"name": "mine"},
    ("PATCH", "/v1/archives/{archive_id}"): {"name": "taken over"},
    ("POST", "/v1/archives/{archive_id}/passages"): {"text": "planted"},
    ("POST", "/v1/archives/{archive_id}/passages/batch"): {"passages": [{"text": "planted"}]},
    ("POST", "/v1/messages/search"): {"query": "garden", "agent_id": "{agent}"},
    ("POST", "/v1/agents/messages/search"): {"query": "garden", "agent_id": "{agent}"},
    ("POST", "/v1/tools/"): {"source_code": "def mine(x: int) -> int:\n    return x"},
    ("PUT", "/v1/tools/"): {"source_code": "def roll(sides: int) -> int:\n    return sides"},
    ("PATCH", "/v1/tools/{tool_id}"): {"description": "taken over"},
    ("POST", "/v1/tools/run"): {"source_code": "def echo(x: int) -> int:\n    return x", "args": {"x": 1}},
    ("PATCH", "/v1/agents/{agent_id}/tools/approval/{tool_name}"): {"requires_approval": True},
    ("POST", "/v1/agents/{agent_id}/messages/cancel"): {},
    ("POST", "/v1/agents/{agent_id}/messages/async"): {"input": "hi"},
    ("POST", "/v1/runs/{run_id}/stream"): {},
    ("POST", "/v1/conversations/"): {},
    ("PATCH", "/v1/conversations/{conversation_id}"): {"summary": "taken over"},
    ("POST", "/v1/conversations/{conversation_id}/messages"): {"input": "hi", "streaming": False},
    ("POST", "/v1/folders/"): {"name": "mine"},
    ("PATCH", "/v1/steps/{step_id}/feedback"): {"feedback": "negative", "tags": ["taken over"]},
    ("POST", "/v1/agents/{agent_id}/tools/{tool_name}/run"): {"args": {"sides": 6}},
    ("PATCH", "/v1/folders/{folder_id}"): {"name": "taken over"},
    ("POST", "/v1/identities/"): {"identifier_key": "mine", "name": "x", "identity_type": "user"},
    ("PUT", "/v1/identities/"): {"identifier_key": "mine", "name": "y", "identity_type": "org"},
    ("PATCH", "/v1/identities/{identity_id}"): {"name": "taken over", "agent_ids": ["{agent}"]},
    ("PUT", "/v1/identities/{identity_id}/properties"): [{"key": "k", "value": "taken over", "type": "string"}],
    ("POST", "/v1/embeddings"): {"input": "garden"},
    ("POST", "/v1/mcp-servers/"): {"server_name": "mine", "config": {"server_url": "http://127.0.0.1:9/sse"}},
    ("PATCH", "/v1/mcp-servers/{mcp_server_id}"): {"server_name": "taken over", "config": {"mcp_server_type": "streamable_http"}},
    ("POST", "/v1/mcp-servers/{mcp_server_id}/tools/{tool_id}/run"): {"args": {}},
    ("POST", "/v1/agents/{agent_id}/mcp-servers/tools/search"): {"query": "garden"},
    ("POST", "/v1/agents/{agent_id}/mcp-servers/{mcp_server_id}/tools/{tool_id}/run"): {"args": {}},
}
# Routes that span every organization: only the admin key may call them.
ADMIN_ONLY = {"/metrics"}
# Query parameters, filled in as BODIES are.
QUERIES = {
    ("GET", "/v1/agents/{agent_id}/archival-memory/search"): {"query": "garden"},
    ("POST", "/v1/conversations/"): {"agent_id": "{agent}"},
}
# Path parameters that name no object of their own (the same in both organizations).
NOT_IDS = ("block_label", "version")
# Multipart uploads, covered by tests/agentfiles/test_isolation.py and tests/api/test_folder_files.py.
UPLOADS = {("POST", "/v1/agents/import"), ("POST", "/v1/folders/{folder_id}/upload")}
# Operations B may run without naming A's objects: they create B's own, or list and search what B sees.
UNSCOPED = {
    ("POST", "/v1/blocks/"),
    ("POST", "/v1/archives/"),
    ("GET", "/v1/agents/"),
    ("GET", "/v1/blocks/"),
    ("GET", "/v1/archives/"),
    ("GET", "/v1/tools/"),
    ("GET", "/v1/tools/count"),
    ("POST", "/v1/tools/"),
    ("PUT", "/v1/tools/"),
    ("POST", "/v1/tools/run"),  # runs the source it is given; reads and writes nothing stored
    ("POST", "/v1/tools/search"),  # B's tools and the built-ins (tests/api/test_tool_search.py too)
    ("POST", "/v1/tools/add-base-tools"),  # the shared built-ins; changes nothing
    ("GET", "/v1/runs/"),
    ("GET", "/v1/steps/"),
    ("GET", "/v1/models/"),  # the provider's models, the default, and the handles of B's own agents
    ("GET", "/v1/models/embedding"),
    ("GET", "/v1/conversations/"),
    ("POST", "/v1/folders/"),
    ("GET", "/v1/folders/"),
    ("GET", "/v1/tags/"),  # the tags of B's agents and blocks (tests/api/test_organization_lists.py too)
    ("GET", "/v1/messages/"),
    ("POST", "/v1/identities/"),
    ("PUT", "/v1/identities/"),
    ("GET", "/v1/identities/"),
    ("GET", "/v1/identities/count"),
    ("POST", "/v1/mcp-servers/"),
    ("GET", "/v1/mcp-servers/"),
    ("POST", "/v1/embeddings"),  # embeds the text it is given; reads and writes nothing stored
}


@pytest.fixture
async def server(settings, llm):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def new_key(client: httpx.AsyncClient, organization: str) -> str:
    created = await client.post("/v1/admin/api-keys", json={"organization": organization}, headers=bearer(ADMIN_KEY))
    assert created.status_code == 200, created.text
    return created.json()["key"]


async def objects_of(client: httpx.AsyncClient, key: str, llm) -> dict[str, str]:
    """An organization's agent (with blocks, tools, a conversation, archival memory and a folder), a
    standalone block and an archive with a passage; their ids by path parameter name."""
    headers = bearer(key)
    agent = (
        await client.post(
            "/v1/agents/", json={"memory_blocks": [{"label": "human", "value": "Bob"}], **ARCHIVAL}, headers=headers
        )
    ).json()
    block = (await client.post("/v1/blocks/", json={"label": "team", "value": "plans"}, headers=headers)).json()
    archive = (await client.post("/v1/archives/", json={"name": "garden notes"}, headers=headers)).json()
    folder = (await client.post("/v1/folders/", json={"name": "garden docs"}, headers=headers)).json()
    attached = await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}", headers=headers)
    upload = {"file": ("garden.md", b"# My garden\n", "text/markdown")}
    file = (await client.post(f"/v1/folders/{folder['id']}/upload", files=upload, headers=headers)).json()
    assert attached.status_code == 200, attached.text
    members = {"agent_ids": [agent["id"]], "block_ids": [block["id"]]}
    who = {"identifier_key": "gardener", "name": "Bob", "identity_type": "user", **members}
    identity = (await client.post("/v1/identities/", json=who, headers=headers)).json()
    unreachable = {"mcp_server_type": "streamable_http", "server_url": "http://127.0.0.1:9/mcp"}
    mcp_server = (
        await client.post("/v1/mcp-servers/", json={"server_name": "garden mcp", "config": unreachable}, headers=headers)
    ).json()
    passage = (await client.post(f"/v1/archives/{archive['id']}/passages", json={"text": "the garden"}, headers=headers)).json()
    memory = (await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": "my garden"}, headers=headers)).json()
    llm.reply("Nice garden.")
    sent = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "my garden"}, headers=headers)).json()
    tool = (await client.post("/v1/tools/", json=BODIES[("PUT", "/v1/tools/")], headers=headers)).json()
    conversation = (await client.post("/v1/conversations/", params={"agent_id": agent["id"]}, headers=headers)).json()
    llm.reply("A garden thread.")
    talk = {"input": "my garden", "streaming": False}
    assert (await client.post(f"/v1/conversations/{conversation['id']}/messages", json=talk, headers=headers)).is_success
    return {
        "agent_id": agent["id"],
        "block_id": block["id"],
        "archive_id": archive["id"],
        "passage_id": passage["id"],
        "memory_id": memory[0]["id"],
        "message_id": sent["messages"][0]["id"],
        "block_label": "human",
        "version": "1",
        "tool_id": tool["id"],
        "tool_name": tool["name"],
        "run_id": sent["messages"][0]["run_id"],
        "step_id": sent["messages"][0]["step_id"],
        "key_id": "apikey-00000000-0000-4000-8000-000000000000",
        "conversation_id": conversation["id"],
        "folder_id": folder["id"],
        "file_id": file["id"],
        "identity_id": identity["id"],
        "mcp_server_id": mcp_server["id"],
    }


def operations(spec: dict) -> list[tuple[str, str]]:
    return [(method.upper(), path) for path, methods in spec["paths"].items() for method in methods]


def fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"{(\w+)}", lambda m: ids[m.group(1)], path)


def body_for(operation: tuple[str, str], ids: dict[str, str], templates: dict = BODIES) -> dict | None:
    names = {"{agent}": ids["agent_id"], "{block}": ids["block_id"], "{archive}": ids["archive_id"]}
    template = templates.get(operation)
    if template is None:
        return None
    text = json.dumps(template)
    for name, value in names.items():
        text = text.replace(name, value)
    return json.loads(text)


async def call(client, operation, path_ids, body_ids, key):
    method, path = operation
    return await client.request(
        method,
        fill(path, path_ids),
        json=body_for(operation, body_ids),
        params=body_for(operation, body_ids, QUERIES),
        headers=bearer(key) if key else {},
    )


async def test_organization_b_reaches_nothing_of_organization_a_on_any_route(server, llm):
    key_a, key_b = await new_key(server, "a"), await new_key(server, "b")
    a = await objects_of(server, key_a, llm)
    b = await objects_of(server, key_b, llm)
    spec = (await server.get("/openapi.json")).json()
    # Deletions last, innermost first: if one got through, the objects later operations name would be gone.
    walked = sorted(
        (op for op in operations(spec) if op != ("GET", "/v1/health/")),
        key=lambda op: (op[0] == "DELETE", -op[1].count("/")),
    )
    assert len(walked) > 40

    failures = []
    for operation in walked:
        method, path = operation
        names = re.findall(r"{(\w+)}", path)
        if path.startswith("/v1/admin/") or path in ADMIN_ONLY:
            expected = {403}
        elif operation in UNSCOPED or operation in UPLOADS:
            continue  # checked below (or in tests/agentfiles/): what B sees lists only B's objects
        elif not names and operation not in BODIES and method != "GET":
            failures.append(f"{method} {path}: the walk has no body for it; add one to BODIES")
            continue
        else:
            expected = {404}
        # A's ids everywhere; then, where two ids meet, B's own object with A's other one, both ways.
        combos = [a]
        for name in names:
            if name not in NOT_IDS:
                combos.append({**a, name: b[name]})
        for path_ids in combos:
            if all(path_ids[n] == b[n] for n in names if n not in NOT_IDS) and names:
                continue
            response = await call(server, operation, path_ids, a, key_b)
            if response.status_code not in expected:
                failures.append(f"{method} {fill(path, path_ids)} -> {response.status_code} {response.text[:120]}")
    assert failures == []

    # A's objects are exactly as they were.
    headers_a = bearer(key_a)
    block = (await server.get(f"/v1/blocks/{a['block_id']}", headers=headers_a)).json()
    agent = (await server.get(f"/v1/agents/{a['agent_id']}", headers=headers_a)).json()
    assert block["value"] == "plans" and block["version"] == 1
    assert agent["description"] is None and [blk["value"] for blk in agent["blocks"]] == ["Bob"]
    conversation = (await server.get(f"/v1/conversations/{a['conversation_id']}", headers=headers_a)).json()
    assert conversation["summary"] is None and len(conversation["in_context_message_ids"]) == 2  # the send, the reply
    folder = (await server.get(f"/v1/folders/{a['folder_id']}", headers=headers_a)).json()
    readers = (await server.get(f"/v1/folders/{a['folder_id']}/agents", headers=headers_a)).json()
    assert folder["name"] == "garden docs" and readers == [a["agent_id"]]
    step = (await server.get(f"/v1/steps/{a['step_id']}", headers=headers_a)).json()
    assert step["feedback"] is None and step["tags"] == []
    identity = (await server.get(f"/v1/identities/{a['identity_id']}", headers=headers_a)).json()
    assert (identity["name"], identity["agent_ids"], identity["block_ids"]) == ("Bob", [a["agent_id"]], [a["block_id"]])
    mcp_server = (await server.get(f"/v1/mcp-servers/{a['mcp_server_id']}", headers=headers_a)).json()
    assert mcp_server["server_name"] == "garden mcp"


async def test_lists_and_searches_show_only_the_callers_objects(server, llm):
    key_a, key_b = await new_key(server, "a"), await new_key(server, "b")
    a = await objects_of(server, key_a, llm)
    b = await objects_of(server, key_b, llm)
    a_ids = {value for name, value in a.items() if name not in ("block_label", "tool_name", "key_id", "version")}
    seen_by_b = []
    for operation in sorted(UNSCOPED | {("POST", "/v1/passages/search"), ("POST", "/v1/messages/search")}):
        method, path = operation
        body = {"query": "garden"} if method == "POST" and "search" in path else body_for(operation, b)
        response = await server.request(method, path, json=body, headers=bearer(key_b))
        assert response.status_code == 200, (operation, response.text)
        seen_by_b.append(response.text)
    leaked = [object_id for object_id in a_ids if any(object_id in text for text in seen_by_b)]
    assert leaked == []
    assert b["passage_id"] in "".join(seen_by_b) and b["agent_id"] in "".join(seen_by_b)


async def test_every_route_but_health_needs_a_key(server):
    spec = (await server.get("/openapi.json")).json()
    ids = {
        name: f"{name.removesuffix('_id')}-00000000-0000-4000-8000-000000000000"
        for name in ("agent_id", "block_id", "archive_id", "passage_id", "message_id", "tool_id", "run_id", "step_id")
    }
    ids |= {"memory_id": ids["passage_id"], "key_id": "apikey-00000000-0000-4000-8000-000000000000", "block_label": "human"}
    ids |= {"tool_name": "memory_insert", "version": "1", "conversation_id": "conv-00000000-0000-4000-8000-000000000000"}
    ids |= {"folder_id": "source-00000000-0000-4000-8000-000000000000", "file_id": "file-00000000-0000-4000-8000-000000000000"}
    ids |= {"identity_id": "identity-00000000-0000-4000-8000-000000000000"}
    ids |= {"mcp_server_id": "mcp_server-00000000-0000-4000-8000-000000000000"}
    refused = []
    for method, path in operations(spec):
        response = await server.request(method, fill(path, ids))
        refused.append((method, path, response.status_code))
    assert [r for r in refused if r[2] != 401 and r[1] != "/v1/health/"] == []
    assert ("GET", "/v1/health/", 200) in refused

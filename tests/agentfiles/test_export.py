"""What an export holds, field by field, where Letta's reader is strict about it (its ToolSchema
refuses unknown fields, its llm_config knows a fixed list of endpoint types, its legacy reader wants
timestamps and lists), and what memvm keeps out of a file (secret values)."""

import json
from pathlib import Path

from tests.support.api import create_agent

FIXTURES = Path(__file__).parent / "fixtures"
LETTA_TOOL_FIELDS = {
    "id", "name", "tool_type", "description", "source_type", "source_code", "json_schema", "args_json_schema",
    "return_char_limit", "tags", "pip_requirements", "npm_requirements", "default_requires_approval",
    "enable_parallel_execution", "metadata_",
}  # fmt: skip


async def imported_sample(client) -> str:
    content = (FIXTURES / "letta-0.16.8-sample.af").read_bytes()
    response = await client.post("/v1/agents/import", files={"file": ("sample.af", content, "application/json")})
    assert response.status_code == 200, response.text
    return response.json()["agent_ids"][0]


async def test_the_export_has_letta_s_shapes(client):
    agent_id = await imported_sample(client)
    await client.patch(f"/v1/agents/{agent_id}", json={"secrets": {"WEATHER_API_KEY": "do-not-leak"}})
    response = await client.get(f"/v1/agents/{agent_id}/export")
    file = response.json()
    [agent] = file["agents"]
    tool_return = next(m for m in agent["messages"] if m["role"] == "tool")
    packed = tool_return["content"][0]["text"]

    assert response.headers["content-type"].startswith("application/json") and "do-not-leak" not in response.text
    assert all(set(tool) <= LETTA_TOOL_FIELDS for tool in file["tools"])
    builtin = next(tool for tool in file["tools"] if tool["name"] == "memory_insert")
    assert builtin["tool_type"] == "letta_sleeptime_core" and builtin["tags"] == ["letta_sleeptime_core"]
    assert agent["llm_config"]["model_endpoint_type"] == "openai" and agent["llm_config"]["handle"] == "openai-proxy/scripted"
    assert agent["secrets"] == {"WEATHER_API_KEY": ""} == agent["tool_exec_environment_variables"]
    assert agent["messages"][0]["role"] == "system" and agent["in_context_message_ids"][0] == agent["messages"][0]["id"]
    assert json.loads(packed) == {"status": "OK", "message": "7", "time": json.loads(packed)["time"]}
    assert packed.startswith('{\n  "status": "OK"') and tool_return["tool_returns"][0]["func_response"] == packed
    assert {m["agent_id"] for m in agent["messages"]} == {agent["id"]}


async def test_a_new_agent_exports_its_system_prompt_and_the_default_model(client):
    agent = await create_agent(client)
    file = (await client.get(f"/v1/agents/{agent['id']}/export")).json()
    scrubbed = (await client.get(f"/v1/agents/{agent['id']}/export", params={"scrub_messages": "true"})).json()

    [entry] = file["agents"]
    assert [m["role"] for m in entry["messages"]] == ["system"] and entry["in_context_message_ids"] == ["message-0"]
    assert scrubbed["agents"][0]["messages"] == [] and scrubbed["agents"][0]["in_context_message_ids"] == []
    assert entry["embedding_config"] is None  # the local model: a Letta server keeps passages as text
    assert entry["include_base_tool_rules"] is False and entry["include_base_tools"] is False


async def test_the_legacy_export_has_what_letta_s_legacy_reader_requires(client):
    agent_id = await imported_sample(client)
    legacy = (await client.get(f"/v1/agents/{agent_id}/export", params={"use_legacy_format": "true"})).json()

    assert "agents" not in legacy and legacy["agent_type"] == "memgpt_v2_agent"
    assert legacy["memvm_agent_type"] == "letta_v1_agent" and legacy["created_at"] and legacy["updated_at"]
    assert all({"created_at", "updated_at", "template_name"} <= block.keys() for block in legacy["core_memory"])
    assert all(isinstance(m["tool_calls"], list) and "group_id" in m and m["updated_at"] for m in legacy["messages"])
    assert legacy["in_context_message_indices"][0] == 0 and legacy["messages"][0]["role"] == "system"
    assert legacy["embedding_config"]["embedding_dim"] == 384 and legacy["llm_config"]["model"] == "scripted"

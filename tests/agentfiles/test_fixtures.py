"""Importing agent files hand-written from Letta's published schema (tests/agentfiles/fixtures/
README.md): the legacy format, custom tools with every rule type, a block shared by two agents,
and a file with several problems (refused whole, each problem named, nothing written)."""

import json
from pathlib import Path

from tests.support.api import compiled_prompt

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = ("agent", "block", "tool", "message", "agent_block", "agent_tool", "block_change", "archive", "passage")


async def upload(client, content: bytes, **form):
    return await client.post("/v1/agents/import", files={"file": ("agent.af", content, "application/json")}, data=form)


async def imported(client, name: str, **form) -> dict:
    response = await upload(client, (FIXTURES / name).read_bytes(), **form)
    assert response.status_code == 200, response.text
    return response.json()


async def history(client, agent_id: str) -> list[dict]:
    return (await client.get(f"/v1/agents/{agent_id}/messages", params={"order": "asc", "limit": 100})).json()


async def counts(db) -> dict[str, int]:
    return {table: await db.fetchval(f"SELECT count(*) FROM {table}") for table in TABLES}


async def test_the_legacy_format_imports(client):
    [agent_id] = (await imported(client, "legacy-single-agent.af"))["agent_ids"]
    agent = (await client.get(f"/v1/agents/{agent_id}")).json()
    messages = await history(client, agent_id)

    assert agent["name"] == "book-club-ada" and agent["agent_type"] == "memgpt_v2_agent"
    assert [b["label"] for b in agent["blocks"]] == ["persona", "human"]
    assert "estimate_reading_time" in {t["name"] for t in agent["tools"]}
    assert {(r["type"], r["tool_name"]) for r in agent["tool_rules"]} == {
        ("exit_loop", "send_message"),
        ("max_count_per_step", "estimate_reading_time"),
    }
    types = [m["message_type"] for m in messages]
    assert "tool_return_message" in types and types.count("assistant_message") >= 2  # send_message speaks
    assert all(m["date"] < "2026" for m in messages[:1]) or messages[0]["date"]  # timestamps kept, not now()


async def test_custom_tools_and_every_rule_type_survive(client):
    source = json.loads((FIXTURES / "custom-tool-rules.af").read_text())
    [agent_id] = (await imported(client, "custom-tool-rules.af"))["agent_ids"]
    agent = (await client.get(f"/v1/agents/{agent_id}")).json()

    tools = {tool["name"]: tool for tool in agent["tools"]}
    originals = {tool["name"]: tool for tool in source["tools"]}
    for name in ("estimate_hike_time", "check_gear"):
        assert tools[name]["source_code"] == originals[name]["source_code"] and tools[name]["tool_type"] == "custom"
        assert tools[name]["json_schema"]["parameters"] == originals[name]["json_schema"]["parameters"]
    assert {"memory_replace", "memory_insert", "conversation_search", "archival_memory_search"} <= tools.keys()
    assert [(r["type"], r["tool_name"]) for r in agent["tool_rules"]] == [
        (r["type"], r["tool_name"]) for r in source["agents"][0]["tool_rules"]
    ]
    conditional = next(r for r in agent["tool_rules"] if r["type"] == "conditional")
    assert (
        conditional["child_output_mapping"]
        == next(r for r in source["agents"][0]["tool_rules"] if r["type"] == "conditional")["child_output_mapping"]
    )
    returns = [m for m in await history(client, agent_id) if m["message_type"] == "tool_return_message"]
    calls = [m for m in await history(client, agent_id) if m["message_type"] == "tool_call_message"]
    assert len(returns) == len(calls) == 3
    assert [r["tool_call_id"] for r in returns] == [c["tool_call"]["tool_call_id"] for c in calls]
    assert agent["timezone"] == "Europe/London"


async def test_a_shared_block_is_shared_again(client):
    first_id, second_id = (await imported(client, "shared-block.af"))["agent_ids"]
    first = (await client.get(f"/v1/agents/{first_id}")).json()
    second = (await client.get(f"/v1/agents/{second_id}")).json()
    shared = {b["id"] for b in first["blocks"]} & {b["id"] for b in second["blocks"]}
    [shared_id] = shared

    edit = await client.patch(f"/v1/blocks/{shared_id}", json={"value": "Refunds within 30 days."})

    assert edit.status_code == 200
    assert "Refunds within 30 days." in await compiled_prompt(client, second_id)
    assert "Refunds within 30 days." in await compiled_prompt(client, first_id)
    personas = [b for view in (first, second) for b in view["blocks"] if b["label"] == "persona"]
    assert len({b["id"] for b in personas}) == 2 and personas[0]["value"] != personas[1]["value"]
    assert [m["message_type"] for m in await history(client, second_id)].count("user_message") == 2


async def test_a_bad_file_is_refused_with_every_problem_and_nothing_written(client, db):
    before = await counts(db)
    response = await upload(client, (FIXTURES / "bad-file.af").read_bytes())
    problems = response.json().get("problems", [])

    assert response.status_code == 400, response.text
    assert len(problems) == 4
    assert any("block-1" in p and "122 characters" in p and "limit of 60" in p for p in problems)
    assert any("block-5" in p for p in problems) and any("message-7" in p for p in problems)
    assert any("call_Qx0missing9aPk4Lw7TbNe2Vs" in p for p in problems)
    assert await counts(db) == before


async def test_repairs_are_opt_in_and_reported(client):
    file = json.loads((FIXTURES / "bad-file.af").read_text())
    agent = file["agents"][0]
    agent["block_ids"].remove("block-5")
    agent["in_context_message_ids"].remove("message-7")
    content = json.dumps(file).encode()

    refused = await upload(client, content)
    repaired = await upload(client, content, truncate_blocks="true", skip_unpaired_messages="true")

    assert refused.status_code == 400 and len(refused.json()["problems"]) == 2
    assert repaired.status_code == 200, repaired.text
    assert len(repaired.json()["repairs"]) == 2
    [agent_id] = repaired.json()["agent_ids"]
    human = (await client.get(f"/v1/agents/{agent_id}/core-memory/blocks/human")).json()
    assert len(human["value"]) == 60
    assert "tool_return_message" not in [m["message_type"] for m in await history(client, agent_id)]


async def test_options_rename_strip_and_override(client):
    result = await imported(
        client,
        "letta-0.16.8-sample.af",
        override_name="editor",
        append_copy_suffix="true",
        strip_messages="true",
        model="openai/another-model",
        secrets='{"API_TOKEN": "s3cret"}',
    )
    agent = (await client.get(f"/v1/agents/{result['agent_ids'][0]}")).json()

    assert agent["name"] == "editor_copy" and agent["model"] == "openai/another-model"
    assert await history(client, agent["id"]) == []
    assert [s["key"] for s in agent["secrets"]] == ["API_TOKEN"] and agent["secrets"][0]["value"] != "s3cret"


async def test_an_existing_tool_is_reused_unless_overridden(client):
    sample = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    mine = sample["tools"][3]["source_code"].replace("return len(text.split())", "return 42")
    created = await client.post("/v1/tools/", json={"source_code": mine})
    assert created.status_code == 200, created.text

    reused = await imported(client, "letta-0.16.8-sample.af")
    kept = (await client.get(f"/v1/tools/{created.json()['id']}")).json()
    await imported(client, "letta-0.16.8-sample.af", override_existing_tools="true")
    replaced = (await client.get(f"/v1/tools/{created.json()['id']}")).json()

    assert "return 42" in kept["source_code"] and any("reused" in note for note in reused["notes"])
    assert "return len(text.split())" in replaced["source_code"]


async def test_unsupported_parts_are_listed_as_skipped(client):
    file = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    file["groups"] = [{"id": "group-0", "agent_ids": ["agent-0"]}]
    file["mcp_servers"] = [{"id": "mcp_server-0", "server_name": "files"}]
    file["tools"].append({"id": "tool-9", "tool_type": "letta_builtin", "name": "run_code"})
    file["agents"][0]["tool_ids"].append("tool-9")
    file["agents"][0]["tool_rules"].append({"type": "continue_loop", "tool_name": "run_code"})

    response = await upload(client, json.dumps(file).encode())
    skipped = {item["part"]: item for item in response.json()["skipped"]}

    assert response.status_code == 200, response.text
    assert skipped["groups"]["count"] == 1 and "mcp_servers" in skipped and "tool run_code" in skipped
    assert any("run_code" in part and "rule" in part for part in skipped)


async def test_what_is_not_an_agent_file_is_a_400(client, db):
    before = await counts(db)
    for content in (b"not json", b"[1, 2]", b'{"agents": [{"name": "x"}]}', b'{"agents": 5}'):
        response = await upload(client, content)
        assert response.status_code == 400, (content, response.text)
        assert response.json()["detail"]
    assert await counts(db) == before


async def test_bad_archives_are_problems_too(client, db):
    file = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    file["archives"] = [{"id": "archive-0", "name": "notes", "passages": [{"text": ""}, {"text": "fine"}]}]
    file["agents"][0]["archive_ids"] = ["archive-0", "archive-9"]
    before = await counts(db)

    response = await upload(client, json.dumps(file).encode())

    problems = response.json()["problems"]
    assert response.status_code == 400 and len(problems) == 2, problems
    assert any("archive-0" in p and "passage 0" in p for p in problems) and any("archive-9" in p for p in problems)
    assert await counts(db) == before


async def test_rules_naming_no_tool_and_bad_handles_are_listed_with_the_rest(client, db):
    file = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    file["agents"][0]["tool_rules"].append({"type": "exit_loop", "tool_name": "no_such_tool"})
    file["agents"][0]["model"] = "no-slash"
    file["agents"].append(dict(file["agents"][0], id="agent-1", tool_rules=[], model=None, name="twin"))
    file["agents"][1]["messages"] = [file["agents"][0]["messages"][5]]  # a tool return without its call
    file["agents"][1]["in_context_message_ids"] = []
    before = await counts(db)

    response = await upload(client, json.dumps(file).encode())

    problems = response.json()["problems"]
    assert response.status_code == 400 and len(problems) == 2, problems
    assert any("agent-0" in p and "model 'no-slash' is not a handle" in p for p in problems), problems
    assert any("agent-1" in p and "follows no assistant message" in p for p in problems)
    assert await counts(db) == before

    del file["agents"][0]["model"], file["agents"][1]
    response = await upload(client, json.dumps(file).encode())
    assert response.status_code == 400 and "no_such_tool" in response.json()["problems"][0]


async def test_an_imported_agents_inserts_go_to_its_first_archive(client, db):
    file = json.loads((FIXTURES / "letta-0.16.8-sample.af").read_text())
    file["archives"] = [
        {"id": "archive-0", "name": "notes", "passages": [{"text": "Ada reads on Sundays"}]},
        {"id": "archive-1", "name": "spare", "passages": []},
    ]
    file["agents"][0]["archive_ids"] = ["archive-0", "archive-1"]
    [agent_id] = (await upload(client, json.dumps(file).encode())).json()["agent_ids"]

    default = "SELECT archive.name FROM agent JOIN archive ON archive.id = agent.default_archive_id WHERE agent.id = $1"
    assert await db.fetchval(default, agent_id) == "notes"
    inserted = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": "and on Mondays"})
    assert inserted.status_code == 200, inserted.text
    assert await db.fetchval("SELECT count(*) FROM archive") == 2  # no new archive of its own
    assert await db.fetchval("SELECT passage_count FROM archive WHERE name = 'notes'") == 2

"""Importing the agent file a real Letta 0.16.8 server exported (tests/agentfiles/fixtures/)."""

from pathlib import Path

from tests.support.api import compiled_prompt

FIXTURES = Path(__file__).parent / "fixtures"


async def import_file(client, name: str, **form) -> dict:
    with open(FIXTURES / name, "rb") as handle:
        response = await client.post("/v1/agents/import", files={"file": (name, handle, "application/json")}, data=form)
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_letta_sample_imports_whole_and_answers_with_its_history(client, llm):
    result = await import_file(client, "letta-0.16.8-sample.af")
    [agent_id] = result["agent_ids"]
    agent = (await client.get(f"/v1/agents/{agent_id}")).json()
    history = (await client.get(f"/v1/agents/{agent_id}/messages", params={"limit": 100, "order": "asc"})).json()

    assert agent["name"] == "sample-editor" and agent["tags"] == ["sample"] and agent["agent_type"] == "letta_v1_agent"
    assert agent["model"] == "openai-proxy/scripted" and agent["context_window_limit"] == 30000
    blocks = {block["label"]: block for block in agent["blocks"]}
    assert blocks["style_guide"]["read_only"] is True and blocks["style_guide"]["limit"] == 600
    assert blocks["human"]["value"] == "Writer: Tomasz. Writes travel essays."
    assert {tool["name"] for tool in agent["tools"]} == {"conversation_search", "memory_insert", "memory_replace", "word_count"}
    assert {"tool_name": "word_count", "type": "max_count_per_step", "max_count_limit": 2} in [
        {k: v for k, v in rule.items() if v is not None and k != "prompt_template"} for rule in agent["tool_rules"]
    ]
    types = [message["message_type"] for message in history]
    assert types == [
        "user_message", "assistant_message", "user_message", "tool_call_message", "tool_return_message",
        "assistant_message", "user_message", "assistant_message",
    ]  # fmt: skip
    assert history[4]["tool_return"] == "7" and history[4]["status"] == "success"
    assert history[0]["date"].startswith("2026-11-30T10:58:00")
    assert "Writer: Tomasz" in await compiled_prompt(client, agent_id)

    llm.reply("I remember.")
    turn = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": "What did we count?"})
    assert turn.status_code == 200, turn.text
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent][:3] == ["system", "user", "assistant"]
    assert sent[1]["content"] == "Hello, can you check my draft intro?"
    assert any(m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "word_count" for m in sent)
    assert sent[-1]["content"].endswith("What did we count?") or "What did we count?" in str(sent[-1]["content"])

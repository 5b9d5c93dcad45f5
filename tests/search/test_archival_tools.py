"""archival_memory_insert / archival_memory_search through the agent loop."""

import json

from tests.support.api import compiled_prompt, create_agent

ARCHIVAL = {"model": "openai/scripted-model", "tools": ["archival_memory_insert", "archival_memory_search"]}


async def send(client, agent_id, text):
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": text})
    assert response.status_code == 200, response.text
    return response.json()


def tool_returns(body):
    return [m for m in body["messages"] if m["message_type"] == "tool_return_message"]


async def test_insert_records_provenance_and_updates_the_next_prompt(client, llm, db):
    agent = await create_agent(client, **ARCHIVAL)
    llm.reply(tool_calls=[("archival_memory_insert", {"content": "Bob's sister lives in Oslo.", "tags": ["family"]})]).reply(
        "Saved."
    )
    llm.reply("ok")

    body = await send(client, agent["id"], "my sister lives in Oslo")
    await send(client, agent["id"], "thanks")

    [result] = tool_returns(body)
    assert result["status"] == "success" and "passage-" in result["tool_return"]
    row = await db.fetchrow("SELECT writer_type, writer_id, step_id, source_message_id, tags FROM passage")
    assert row["writer_type"] == "agent" and row["writer_id"] == agent["id"] and row["step_id"].startswith("step-")
    assert row["source_message_id"] == body["messages"][0]["id"] and row["tags"] == ["family"]
    assert "1 total memories you created are stored in archival memory" in llm.requests[-1]["messages"][0]["content"]
    assert "1 total memories" not in llm.requests[0]["messages"][0]["content"]
    assert "Available archival memory tags: family" in await compiled_prompt(client, agent["id"])


async def test_search_returns_compact_json_with_scores(client, llm):
    agent = await create_agent(client, **ARCHIVAL)
    for text in ["Bob's daughter is learning the violin.", "The office moved near the harbour.", "Bob dislikes cilantro."]:
        await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": text, "tags": ["fact"]})
    llm.reply(tool_calls=[("archival_memory_search", {"query": "what instrument is his kid studying?", "top_k": 2})]).reply(
        "The violin."
    )

    body = await send(client, agent["id"], "what does my kid play?")

    [result] = tool_returns(body)
    payload = json.loads(result["tool_return"])
    assert payload["message"] == "Showing 2 results:"
    first = payload["results"][0]
    assert first["content"] == "Bob's daughter is learning the violin." and first["tags"] == ["fact"]
    assert (
        set(first) == {"id", "timestamp", "content", "tags", "relevance"}
        and first["relevance"] > payload["results"][1]["relevance"]
    )


async def test_search_with_nothing_stored_says_no_results(client, llm):
    agent = await create_agent(client, **ARCHIVAL)
    llm.reply(tool_calls=[("archival_memory_search", {"query": "anything"})]).reply("Nothing yet.")

    body = await send(client, agent["id"], "what do you remember?")

    [result] = tool_returns(body)
    assert result["status"] == "success"
    assert json.loads(result["tool_return"]) == {"message": "No results found.", "results": []}


async def test_bad_search_arguments_are_errors(client, llm):
    agent = await create_agent(client, **ARCHIVAL)
    llm.reply(
        tool_calls=[
            ("archival_memory_search", {"query": "x", "tag_match_mode": "some"}),
            ("archival_memory_search", {"query": "x", "start_datetime": "last week"}),
            ("archival_memory_insert", {"content": "   "}),
        ]
    ).reply("sorry")

    body = await send(client, agent["id"], "search")

    assert [r["status"] for r in tool_returns(body)] == ["error", "error", "error"]
    assert "tag_match_mode" in tool_returns(body)[0]["tool_return"] and "ISO 8601" in tool_returns(body)[1]["tool_return"]

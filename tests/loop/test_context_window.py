from memvm.runtime.loop.compaction import SUMMARIZER_INSTRUCTIONS
from tests.support.api import compiled_prompt, create_agent

SMALL = {
    "model": "openai/scripted-model",
    "system": "You are a test agent.",
    "context_window_limit": 1024,
    "include_base_tools": False,
    "tools": ["memory_insert"],
    "memory_blocks": [{"label": "human", "value": "Name: Bob"}],
}
LONG = "x" * 400


async def send(client, agent_id, text):
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": text})
    assert response.status_code == 200, response.text
    return response.json()


async def fill_history(client, llm, agent_id, turns=3):
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})]).reply("a1 " + LONG)
    await send(client, agent_id, "u1 " + LONG)
    for n in range(2, turns + 1):
        llm.reply(f"a{n} " + LONG)
        await send(client, agent_id, f"u{n} " + LONG)


def summarizer_requests(llm):
    return [r for r in llm.requests if r["messages"][0]["content"] == SUMMARIZER_INSTRUCTIONS]


async def test_full_window_is_compacted_into_a_summary_before_the_call(client, llm, db):
    agent = await create_agent(client, **SMALL)
    await fill_history(client, llm, agent["id"])
    llm.reply("SUMMARY: Bob likes tea").reply("a4")

    body = await send(client, agent["id"], "u4 " + LONG)

    assert body["messages"][-1]["content"] == "a4"
    [summarizer] = summarizer_requests(llm)
    assert "u1" in summarizer["messages"][1]["content"]
    after = llm.requests[-1]["messages"]
    assert after[1]["role"] == "user" and "SUMMARY: Bob likes tea" in after[1]["content"]
    assert after[2]["role"] != "tool"  # a tool result never starts the kept tail
    assert after[-1]["content"] == "u4 " + LONG
    evicted = await db.fetchval("SELECT count(*) FROM message WHERE NOT in_context")
    assert evicted > 0
    assert f"{evicted} previous messages between you and the user are stored in recall memory" in await compiled_prompt(
        client, agent["id"]
    )
    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc", "limit": 100})).json()
    assert history[0]["content"] == "u1 " + LONG  # evicted messages stay in the history


async def test_failed_compaction_stops_the_turn_with_a_clear_reason(client, llm):
    agent = await create_agent(client, **SMALL)
    await fill_history(client, llm, agent["id"])
    llm.fail(500, "summarizer down").fail(500, "summarizer down")

    response = await client.post(f"/v1/agents/{agent['id']}/messages/stream", json={"input": "u4 " + LONG})

    assert '"stop_reason": "error"' in response.text
    assert "Summarizing old messages failed" in response.text and "summarizer down" in response.text


async def test_system_prompt_too_big_for_the_window_is_reported(client, llm):
    agent = await create_agent(client, **{**SMALL, "system": "rules " * 1000})
    llm.default("never reached")

    body = await send(client, agent["id"], "hi")

    assert body["stop_reason"]["stop_reason"] == "error"
    assert llm.requests == []


async def test_summarize_on_demand_and_context_report(client, llm):
    agent = await create_agent(client, **{**SMALL, "context_window_limit": 100000})
    await fill_history(client, llm, agent["id"], turns=2)
    before = (await client.get(f"/v1/agents/{agent['id']}/context")).json()
    llm.reply("Bob likes tea; said hello twice.")

    result = await client.post(f"/v1/agents/{agent['id']}/summarize")
    after = (await client.get(f"/v1/agents/{agent['id']}/context")).json()

    assert result.status_code == 200
    assert result.json()["summary"] == "Bob likes tea; said hello twice."
    assert result.json()["num_messages_before"] == before["num_messages"] == 6
    assert after["num_messages"] == 1 and after["num_recall_memory"] == 6
    assert after["num_tokens_messages"] == 0 and after["num_tokens_summary_memory"] > 0
    assert before["num_tokens_messages"] > 400 and before["context_window_size_max"] == 100000
    assert before["num_tokens_core_memory"] > 0 and before["num_tokens_functions_definitions"] > 0
    assert after["context_window_size_current"] < before["context_window_size_current"]


async def test_summarize_with_empty_window_is_400(client, llm):
    agent = await create_agent(client, **SMALL)

    response = await client.post(f"/v1/agents/{agent['id']}/summarize")

    assert response.status_code == 400 and "nothing to summarize" in response.json()["detail"]


async def test_reset_messages_empties_the_window_but_keeps_history(client, llm):
    agent = await create_agent(client, **{**SMALL, "context_window_limit": 100000})
    await fill_history(client, llm, agent["id"], turns=2)
    llm.reply("fresh start")

    reset = await client.patch(f"/v1/agents/{agent['id']}/reset-messages")
    await send(client, agent["id"], "hello again")

    assert reset.status_code == 200
    assert [m["role"] for m in llm.requests[-1]["messages"]] == ["system", "user"]
    assert "6 previous messages" in llm.requests[-1]["messages"][0]["content"]
    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"limit": 100})).json()
    assert len(history) == 8

"""The agent step loop end to end: HTTP → loop → the real openai client → a scripted model server."""

import json

from tests.support.api import compiled_prompt, create_agent

MODEL = {"model": "openai/scripted-model"}


async def send(client, agent_id, text="hi", **options):
    response = await client.post(
        f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": text}], **options}
    )
    assert response.status_code == 200, response.text
    return response.json()


def types(body):
    return [m["message_type"] for m in body["messages"]]


async def test_plain_answer_ends_the_turn(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("Hello Bob!", usage=(120, 5))

    body = await send(client, agent["id"], "Hi, I am Bob")

    assert types(body) == ["assistant_message"]
    assert body["messages"][0]["content"] == "Hello Bob!"
    assert body["stop_reason"] == {"message_type": "stop_reason", "stop_reason": "end_turn"}
    assert body["usage"]["prompt_tokens"] == 120 and body["usage"]["completion_tokens"] == 5 and body["usage"]["step_count"] == 1
    sent = llm.requests[0]
    assert sent["model"] == "scripted-model"
    assert sent["messages"][0]["role"] == "system" and "<memory_blocks>" in sent["messages"][0]["content"]
    assert sent["messages"][-1] == {"role": "user", "content": "Hi, I am Bob"}
    assert sorted(t["function"]["name"] for t in sent["tools"]) == ["conversation_search", "memory_insert", "memory_replace"]
    assert sent["tool_choice"] == "auto"


async def test_memory_edit_reaches_the_model_on_the_next_turn_not_this_one(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Name: Bob", "new_string": "Name: Robert"})])
    llm.reply("Noted, Robert.")
    llm.reply("Hi again Robert.")

    first = await send(client, agent["id"], "Call me Robert")
    await send(client, agent["id"], "Who am I?")

    assert types(first) == ["tool_call_message", "tool_return_message", "assistant_message"]
    assert first["messages"][1]["status"] == "success"
    turn_one_step_one, turn_one_step_two, turn_two = (r["messages"][0]["content"] for r in llm.requests)
    assert "Name: Bob" in turn_one_step_one and "Name: Robert" not in turn_one_step_one
    assert "Name: Robert" not in turn_one_step_two  # same turn: still the prompt it started with
    assert "Name: Robert" in turn_two and "Name: Bob\n" not in turn_two
    tool_result = json.loads(llm.requests[1]["messages"][-1]["content"])
    assert tool_result["status"] == "OK" and "human" in tool_result["message"]
    assert "Name: Robert" in await compiled_prompt(client, agent["id"])


async def test_tool_edit_is_recorded_with_agent_and_step(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})]).reply("ok")

    await send(client, agent["id"])

    change = await db.fetchrow("SELECT actor_type, actor_id, step_id, value FROM block_change WHERE change = 'update'")
    assert change["actor_type"] == "agent" and change["actor_id"] == agent["id"]
    assert change["step_id"].startswith("step-") and change["value"] == "Name: Bob\nLikes: tea"


async def test_over_limit_and_read_only_edits_become_tool_errors(client, llm):
    agent = await create_agent(
        client,
        **MODEL,
        memory_blocks=[
            {"label": "human", "value": "Bob", "limit": 10},
            {"label": "policy", "value": "be kind", "read_only": True},
        ],
    )
    llm.reply(
        tool_calls=[
            ("memory_insert", {"label": "human", "new_string": "a very long fact"}),
            ("memory_replace", {"label": "policy", "old_string": "kind", "new_string": "rude"}),
        ]
    )
    llm.reply("Sorry, could not save that.")

    body = await send(client, agent["id"])

    returns = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert [r["status"] for r in returns] == ["error", "error"]
    assert "over its limit of 10" in returns[0]["tool_return"]
    assert "read-only" in returns[1]["tool_return"]
    blocks = {b["label"]: b for b in (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks")).json()}
    assert blocks["human"]["value"] == "Bob" and blocks["policy"]["value"] == "be kind"
    assert body["stop_reason"]["stop_reason"] == "end_turn"


async def test_malformed_tool_arguments_get_an_error_the_model_can_correct(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", '{"label": "human", "new_string": ')])
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Age: 40"})])
    llm.reply("done")

    body = await send(client, agent["id"])

    returns = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert returns[0]["status"] == "error" and "not valid JSON" in returns[0]["tool_return"]
    assert returns[1]["status"] == "success"
    assert body["stop_reason"]["stop_reason"] == "end_turn"


async def test_persistent_invalid_calls_stop_with_invalid_tool_call(client, llm):
    agent = await create_agent(client, **MODEL)
    for _ in range(3):
        llm.reply(tool_calls=[("no_such_tool", {})])

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "invalid_tool_call"
    assert "Tool 'no_such_tool' is not available now" in body["messages"][1]["tool_return"]


async def test_max_steps_stops_the_loop(client, llm):
    agent = await create_agent(client, **MODEL)
    for _ in range(2):
        llm.reply(tool_calls=[("conversation_search", {"query": "anything"})])

    body = await send(client, agent["id"], max_steps=2)

    assert body["stop_reason"]["stop_reason"] == "max_steps"
    assert body["usage"]["step_count"] == 2 and len(llm.requests) == 2


async def test_provider_failure_ends_with_llm_api_error_and_stores_nothing(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.fail(500).fail(500)

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "llm_api_error"
    assert body["messages"] == []
    assert await db.fetchval("SELECT count(*) FROM message") == 0
    assert len(llm.requests) == 2  # retried once (llm_attempts=2), then gave up


async def test_provider_error_is_retried_then_succeeds(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.fail(503).reply("recovered")

    body = await send(client, agent["id"])

    assert body["messages"][0]["content"] == "recovered"


async def test_history_is_kept_and_sent_back_in_order(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "x"})]).reply("first answer").reply("second answer")

    await send(client, agent["id"], "one")
    await send(client, agent["id"], "two")

    roles = [m["role"] for m in llm.requests[2]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    listed = (await client.get(f"/v1/agents/{agent['id']}/messages")).json()
    assert [m["message_type"] for m in listed] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "user_message",
        "assistant_message",
    ]
    assert listed[0]["content"] == "one" and listed[-1]["content"] == "second answer"


async def test_send_with_input_shorthand_and_bad_bodies(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("hi")

    ok = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hello"})
    both = await client.post(
        f"/v1/agents/{agent['id']}/messages", json={"input": "x", "messages": [{"role": "user", "content": "y"}]}
    )
    empty = await client.post(f"/v1/agents/{agent['id']}/messages", json={"messages": []})

    assert ok.status_code == 200 and llm.requests[0]["messages"][-1]["content"] == "hello"
    assert both.status_code == 422 and "exactly one" in both.json()["detail"]
    assert empty.status_code == 422


async def test_agent_without_model_gets_a_clear_400(client, llm):
    agent = await create_agent(client)

    response = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hello"})

    assert response.status_code == 400
    assert "has no model" in response.json()["detail"]
    assert llm.requests == []


async def test_llm_config_endpoint_and_model_are_used(client, llm):
    agent = await create_agent(
        client, llm_config={"model": "custom-model", "model_endpoint": llm.base_url, "context_window": 8000}
    )
    llm.reply("ok")

    await send(client, agent["id"])

    assert llm.requests[0]["model"] == "custom-model"

"""Letta's message_buffer_autoclear: with it on, a finished turn leaves nothing of the conversation in
the context window, so the next model call sees the system prompt (core memory) and the new input
only; the messages stay stored, listed and searchable. A turn stopped for an approval keeps its
window until the answer finishes it."""

import pytest

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}
LOCATION = {"name": "get_location", "description": "Where the user is.", "parameters": {"type": "object", "properties": {}}}


async def send(client, agent_id: str, body: dict) -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def contents(request: dict) -> list[str]:
    """What the model was shown after the system prompt."""
    return [m.get("content") or "" for m in request["messages"][1:]]


@pytest.mark.parametrize("autoclear", [False, True])
async def test_the_next_turn_sees_the_previous_one_only_without_autoclear(client, llm, db, autoclear):
    agent = await create_agent(client, **MODEL, message_buffer_autoclear=autoclear)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})]).reply("Noted, Bob.")
    llm.reply("Hello again.")

    await send(client, agent["id"], {"input": "I am Bob and I like tea"})
    await send(client, agent["id"], {"input": "Who am I?"})

    second_turn = llm.requests[2]
    seen = contents(second_turn)
    if autoclear:
        assert seen == ["Who am I?"]
    else:
        assert seen[0] == "I am Bob and I like tea" and "Noted, Bob." in seen and seen[-1] == "Who am I?"
    assert "Likes: tea" in second_turn["messages"][0]["content"]  # core memory stays either way
    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()
    assert [m["message_type"] for m in history] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "user_message",
        "assistant_message",
    ]
    in_context = await db.fetchval("SELECT count(*) FROM message WHERE in_context")
    assert in_context == (0 if autoclear else 6)


async def test_autoclear_turned_on_later_clears_from_the_next_finished_turn(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("one").reply("two").reply("three")

    await send(client, agent["id"], {"input": "first"})
    patched = await client.patch(f"/v1/agents/{agent['id']}", json={"message_buffer_autoclear": True})
    await send(client, agent["id"], {"input": "second"})
    await send(client, agent["id"], {"input": "third"})

    assert patched.status_code == 200 and patched.json()["message_buffer_autoclear"] is True
    assert contents(llm.requests[1]) == ["first", "one", "second"]
    assert contents(llm.requests[2]) == ["third"]


async def test_a_turn_waiting_for_an_approval_keeps_its_window_until_the_answer_finishes_it(client, llm, db):
    agent = await create_agent(client, **MODEL, message_buffer_autoclear=True)
    llm.reply(tool_calls=[("get_location", {})])
    stopped = await send(client, agent["id"], {"input": "where am I?", "client_tools": [LOCATION]})
    [request] = [m for m in stopped["messages"] if m["message_type"] == "approval_request_message"]
    waiting_in_context = await db.fetchval("SELECT count(*) FROM message WHERE in_context")
    llm.reply("You are in Lisbon.").reply("Hi.")

    result = {"type": "tool", "tool_call_id": request["tool_call"]["tool_call_id"], "tool_return": "Lisbon", "status": "success"}
    answered = await send(client, agent["id"], {"messages": [{"type": "approval", "approvals": [result]}]})
    await send(client, agent["id"], {"input": "thanks"})

    assert stopped["stop_reason"]["stop_reason"] == "requires_approval" and waiting_in_context == 2
    assert answered["stop_reason"]["stop_reason"] == "end_turn"
    assert contents(llm.requests[1])[0] == "where am I?" and "Lisbon" in contents(llm.requests[1])[-1]
    assert contents(llm.requests[2]) == ["thanks"]

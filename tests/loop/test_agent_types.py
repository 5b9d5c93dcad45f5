import json

from memvm.tools.builtin import BUILTIN_SPECS
from tests.support.api import create_agent


async def test_memgpt_v2_agent_speaks_through_send_message_and_continues_on_heartbeat(client, llm):
    agent = await create_agent(client, model="openai/scripted-model", agent_type="memgpt_v2_agent")
    llm.reply(
        "User shared a fact; saving it.",
        tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea", "request_heartbeat": True})],
    )
    llm.reply(tool_calls=[("send_message", {"message": "Got it, you like tea!"})])

    body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I like tea"})).json()

    assert [m["message_type"] for m in body["messages"]] == [
        "reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
    ]
    assert body["messages"][0]["reasoning"] == "User shared a fact; saving it."
    assert body["messages"][-1]["content"] == "Got it, you like tea!"
    assert body["stop_reason"]["stop_reason"] == "end_turn"
    first, second = llm.requests
    assert first["tool_choice"] == "required"
    insert_schema = next(t for t in first["tools"] if t["function"]["name"] == "memory_insert")["function"]["parameters"]
    assert "request_heartbeat" in insert_schema["required"]
    send_schema = next(t for t in first["tools"] if t["function"]["name"] == "send_message")["function"]["parameters"]
    assert "request_heartbeat" not in send_schema["properties"]
    heartbeat = json.loads(second["messages"][-1]["content"])
    assert second["messages"][-1]["role"] == "user" and heartbeat["type"] == "heartbeat"
    assert "request_heartbeat=true" in heartbeat["reason"]


async def test_memgpt_v2_answer_without_tool_call_is_no_tool_call(client, llm):
    agent = await create_agent(client, model="openai/scripted-model", agent_type="memgpt_v2_agent")
    llm.reply("just text")

    body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})).json()

    assert body["stop_reason"]["stop_reason"] == "no_tool_call"


async def test_default_tools_per_agent_type_and_tools_api(client, llm):
    v1 = await create_agent(client)
    v2 = await create_agent(client, agent_type="memgpt_v2_agent", tools=["memory"])

    v1_tools = (await client.get(f"/v1/agents/{v1['id']}/tools")).json()
    v2_tools = (await client.get(f"/v1/agents/{v2['id']}/tools")).json()
    all_tools = (await client.get("/v1/tools/")).json()

    assert [t["name"] for t in v1_tools] == ["conversation_search", "memory_replace", "memory_insert"]
    assert [t["name"] for t in v2_tools] == ["send_message", "conversation_search", "memory_replace", "memory_insert", "memory"]
    assert sorted(t["name"] for t in all_tools) == sorted(BUILTIN_SPECS) and all(t["id"].startswith("tool-") for t in all_tools)
    memory = next(t for t in all_tools if t["name"] == "memory")
    assert memory["json_schema"]["parameters"]["properties"]["command"]["enum"][0] == "view"


async def test_attach_and_detach_tools_change_what_the_model_is_offered(client, llm):
    agent = await create_agent(client, model="openai/scripted-model")
    tools = {t["name"]: t["id"] for t in (await client.get("/v1/tools/")).json()}
    llm.reply("a").reply("b")

    attached = await client.patch(f"/v1/agents/{agent['id']}/tools/attach/{tools['memory_rethink']}")
    detached = await client.patch(f"/v1/agents/{agent['id']}/tools/detach/{tools['conversation_search']}")
    await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})
    again = await client.patch(f"/v1/agents/{agent['id']}/tools/detach/{tools['conversation_search']}")

    assert attached.status_code == detached.status_code == 200
    offered = sorted(t["function"]["name"] for t in llm.requests[0]["tools"])
    assert offered == ["memory_insert", "memory_replace", "memory_rethink"]
    assert again.status_code == 404


async def test_unknown_tool_name_at_creation_is_400(client):
    response = await client.post("/v1/agents/", json={"tools": ["no_such_tool"]})

    assert response.status_code == 400 and "no_such_tool" in response.json()["detail"]


async def test_conversation_search_finds_old_messages(client, llm):
    agent = await create_agent(client, model="openai/scripted-model")
    llm.reply("Noted the zebra.")
    await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "My favourite animal is the zebra"})
    llm.reply(tool_calls=[("conversation_search", {"query": "zebra", "roles": ["user"]})]).reply("You like zebras.")

    body = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "what animal do I like?"})).json()

    result = json.loads(body["messages"][1]["tool_return"])
    assert result["message"].startswith("Showing 1 results")
    assert result["results"][0]["content"] == "My favourite animal is the zebra"


async def test_every_reader_of_stored_history_shows_a_memgpt_turn_as_the_turn_answered(client, llm):
    """A memgpt agent's send_message is an assistant_message, and its tool return is not shown,
    wherever the stored turn is read again (agents/letta_messages.py reads the type for all of them)."""
    agent = await create_agent(client, model="openai/scripted-model", agent_type="memgpt_v2_agent")
    llm.reply(tool_calls=[("send_message", {"message": "Hello, Bob."})])
    answered = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})).json()
    [run] = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()
    [step] = (await client.get(f"/v1/runs/{run['id']}/steps")).json()
    [(message_id, _)] = turn = shown(answered["messages"])

    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()
    by_id = (await client.get(f"/v1/messages/{message_id}")).json()
    of_run = (await client.get(f"/v1/runs/{run['id']}/messages")).json()
    of_step = (await client.get(f"/v1/steps/{step['id']}/messages")).json()

    assert turn == [(message_id, "assistant_message: Hello, Bob.")]
    assert shown(history) == shown(by_id) == shown(of_run) == shown(of_step) == turn


def shown(letta_messages: list[dict]) -> list[tuple[str, str]]:
    """What a reader shows of the agent's side of the conversation: id, type and text."""
    return [(m["id"], f"{m['message_type']}: {m.get('content')}") for m in letta_messages if m["message_type"] != "user_message"]

"""conversation_search inside a conversation's turn: the scripted model calls the tool, and what it
finds is that conversation's history, or with `all_conversations` every conversation of the agent
(its default one included), never another agent's."""

import json

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}


async def send(client, llm, conversation_id, text, *, agent_id=None, answer="Noted.") -> dict:
    llm.reply(answer)
    body = {"input": text, "streaming": False, "agent_id": agent_id}
    response = await client.post(f"/v1/conversations/{conversation_id}/messages", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_conversation_search_reads_this_conversation_unless_asked_for_all(client, llm):
    agent = (await create_agent(client, **MODEL))["id"]
    other = (await create_agent(client, **MODEL))["id"]
    thread = (await client.post("/v1/conversations/", params={"agent_id": agent})).json()["id"]
    await send(client, llm, "default", "I planted tulips by the fence.", agent_id=agent)
    await send(client, llm, thread, "My tulips bloomed purple.")
    await send(client, llm, "default", "Tulips of the other agent.", agent_id=other)
    llm.reply(
        tool_calls=[
            ("conversation_search", {"query": "tulips", "roles": ["user"]}),
            ("conversation_search", {"query": "tulips", "roles": ["user"], "all_conversations": True}),
        ]
    )

    body = await send(client, llm, thread, "Which flowers did I mention?", answer="Tulips.")

    here, everywhere = [json.loads(m["tool_return"]) for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert [r["content"] for r in here["results"]] == ["My tulips bloomed purple."]
    assert {r["content"] for r in everywhere["results"]} == {"My tulips bloomed purple.", "I planted tulips by the fence."}

import asyncio
import json

import httpx

from tests.support.api import create_agent
from tests.support.sse import parse_sse

MODEL = {"model": "openai/scripted-model"}


async def stream(client, path, body):
    response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


async def test_streaming_sends_each_stored_message_then_stop_usage_done(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})]).reply("Saved.")

    events = await stream(client, f"/v1/agents/{agent['id']}/messages", {"input": "I like tea", "streaming": True})

    kinds = [e.get("message_type", "DONE" if e.get("done") else None) for e in events]
    assert kinds == [
        "ping",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
        "DONE",
    ]
    assert events[4]["stop_reason"] == "end_turn" and events[5]["step_count"] == 2
    for event in events[1:4]:
        stored = await client.get(f"/v1/messages/{event['id']}")
        assert stored.status_code == 200 and event["message_type"] in [m["message_type"] for m in stored.json()]


async def test_stream_route_forces_streaming_and_pings_can_be_off(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("hello")

    events = await stream(client, f"/v1/agents/{agent['id']}/messages/stream", {"input": "hi", "include_pings": False})

    assert [e.get("message_type") for e in events[:-1]] == ["assistant_message", "stop_reason", "usage_statistics"]
    assert events[-1] == {"done": True}


async def test_stream_tokens_sends_partial_text_with_the_stored_message_id(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("The quick brown fox jumps over the lazy dog")

    events = await stream(client, f"/v1/agents/{agent['id']}/messages", {"input": "hi", "streaming": True, "stream_tokens": True})

    pieces = [e for e in events if e.get("message_type") == "assistant_message"]
    assert len(pieces) > 1
    assert "".join(p["content"] for p in pieces) == "The quick brown fox jumps over the lazy dog"
    assert len({p["id"] for p in pieces}) == 1
    stored = (await client.get(f"/v1/messages/{pieces[0]['id']}")).json()
    assert stored[0]["content"] == "The quick brown fox jumps over the lazy dog"


async def test_errors_inside_the_loop_arrive_in_band(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.fail(500, "upstream exploded").fail(500, "upstream exploded")

    events = await stream(client, f"/v1/agents/{agent['id']}/messages", {"input": "hi", "streaming": True})

    assert events[1] == {"message_type": "stop_reason", "stop_reason": "llm_api_error"}
    error = next(e for e in events if e.get("_event") == "error")
    assert error["message_type"] == "error_message" and "upstream exploded" in error["message"]
    assert events[-1] == {"done": True}


async def test_errors_before_the_turn_are_plain_http_errors(client, llm):
    missing = await client.post(
        "/v1/agents/agent-00000000-0000-4000-8000-000000000000/messages", json={"input": "hi", "streaming": True}
    )

    assert missing.status_code == 404


async def test_client_disconnect_mid_stream_leaves_a_consistent_agent(live_url, llm, db):
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "fact one"})])
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "fact two"})], delay=1.5)
    llm.reply("after the disconnect")
    async with httpx.AsyncClient(base_url=live_url, timeout=10) as http:
        agent = await create_agent(http, **MODEL)
        async with http.stream("POST", f"/v1/agents/{agent['id']}/messages/stream", json={"input": "go"}) as response:
            async for line in response.aiter_lines():
                if "tool_return_message" in line:
                    break  # leave while the second step is still waiting for the model
        await asyncio.sleep(2.0)

        again = await http.post(f"/v1/agents/{agent['id']}/messages", json={"input": "still there?"})

    assert again.status_code == 200 and again.json()["messages"][-1]["content"] == "after the disconnect"
    calls = await db.fetch("SELECT tool_calls FROM message WHERE role = 'assistant' AND tool_calls IS NOT NULL")
    call_ids = {call["id"] for row in calls for call in json.loads(row["tool_calls"])}
    answered = {row["tool_call_id"] for row in await db.fetch("SELECT tool_call_id FROM message WHERE role = 'tool'")}
    assert call_ids == answered  # every stored tool call has its result
    runs = [tuple(r) for r in await db.fetch("SELECT status, stop_reason FROM run ORDER BY created_at")]
    assert runs == [("cancelled", "cancelled"), ("completed", "end_turn")]

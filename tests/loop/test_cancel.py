"""Cancelling a running turn: POST /v1/agents/{id}/messages/cancel stops it during the model call
or between steps; nothing of the unfinished step is stored, the run ends `cancelled`, a streaming
client gets the final stop_reason, and the agent takes the next turn normally."""

import asyncio
import time

from tests.support.api import create_agent
from tests.support.sse import parse_sse

MODEL = {"model": "openai/scripted-model"}
SLOW = 20.0  # seconds the scripted model would take; a cancel must end the turn long before


async def active_run(client, agent_id: str, llm, calls: int = 1) -> str:
    """The running turn's run id, once the turn waits on its `calls`-th model call."""
    for _ in range(200):
        active = (await client.get("/v1/runs/", params={"agent_id": agent_id, "active": "true"})).json()
        if active and len(llm.requests) >= calls:
            return active[0]["id"]
        await asyncio.sleep(0.05)
    raise AssertionError("no run waiting on the model")


async def test_cancel_stops_a_turn_waiting_on_the_model_and_stores_nothing_of_it(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("too late", delay=SLOW)
    started = time.monotonic()
    sending = asyncio.create_task(client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"}))
    run_id = await active_run(client, agent["id"], llm)

    cancelled = await client.post(f"/v1/agents/{agent['id']}/messages/cancel", json={})
    body = (await sending).json()
    llm.reply("Hello again.")
    after = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "still there?"})).json()

    assert cancelled.json() == {run_id: "cancelled"}
    assert body["stop_reason"]["stop_reason"] == "cancelled" and time.monotonic() - started < SLOW / 2
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "cancelled" and run["stop_reason"] == "cancelled"
    history = (await client.get(f"/v1/agents/{agent['id']}/messages", params={"order": "asc"})).json()
    assert "too late" not in [m.get("content") for m in history]
    assert after["stop_reason"]["stop_reason"] == "end_turn" and after["messages"][-1]["content"] == "Hello again."


async def test_cancel_between_steps_keeps_the_finished_step(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})]).reply("too late", delay=SLOW)
    sending = asyncio.create_task(client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"}))
    run_id = await active_run(client, agent["id"], llm, calls=2)  # the first step is stored

    await client.post(f"/v1/agents/{agent['id']}/messages/cancel", json={"run_ids": [run_id]})
    body = (await sending).json()

    assert body["stop_reason"]["stop_reason"] == "cancelled"
    kinds = [m["message_type"] for m in body["messages"]]
    assert kinds == ["tool_call_message", "tool_return_message"]
    assert len((await client.get(f"/v1/runs/{run_id}/steps")).json()) == 1


async def test_a_streaming_client_gets_the_final_stop_reason(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply("too late", delay=SLOW)
    streaming = asyncio.create_task(client.post(f"/v1/agents/{agent['id']}/messages/stream", json={"input": "hi"}))
    await active_run(client, agent["id"], llm)

    await client.post(f"/v1/agents/{agent['id']}/messages/cancel")
    events = parse_sse((await streaming).text)

    assert [e["stop_reason"] for e in events if e.get("message_type") == "stop_reason"] == ["cancelled"]
    assert events[-1] == {"done": True}


async def test_cancel_with_nothing_running_answers_empty(client):
    agent = await create_agent(client, **MODEL)

    answered = await client.post(f"/v1/agents/{agent['id']}/messages/cancel", json={})

    assert answered.status_code == 200 and answered.json() == {}

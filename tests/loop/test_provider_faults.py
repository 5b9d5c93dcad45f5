"""Provider faults: whatever the model server does wrong, the turn ends with the documented stop reason
within max_steps, and nothing partial is stored.

"Nothing partial": every stored assistant tool call has its result in the same step (a step is one
transaction), a failed model call stores no message, the run has ended with the turn's stop reason,
and the run's step rows are the steps stored (successful ones) plus at most one failed model call.

The fault matrix (README "How a turn works"; retries: llm_attempts=2 in the test settings):

| fault                                      | stop reason       | stored                              |
|--------------------------------------------|-------------------|-------------------------------------|
| timeout on every attempt                   | llm_api_error     | nothing; run failed, 1 failed step  |
| HTTP 500 on every attempt                  | llm_api_error     | nothing; run failed, 1 failed step  |
| 429 with retry-after, then an answer       | end_turn          | the turn, after waiting retry-after |
| 429 with retry-after on every attempt      | llm_api_error     | nothing; run failed, 1 failed step  |
| a body that is not JSON                    | llm_api_error     | nothing; run failed, 1 failed step  |
| a stream whose events are not JSON         | llm_api_error     | nothing; run failed, 1 failed step  |
| a stream that stops half-way               | llm_api_error     | nothing (the client saw the tokens) |
| a later step fails (after a tool step)     | llm_api_error     | the whole first step, not the second|
| tool arguments that are not JSON, always   | invalid_tool_call | 3 steps, each call with its error   |
| tool arguments missing a required field    | invalid_tool_call | 3 steps, each call with its error   |
| a model that calls tools forever           | max_steps         | max_steps steps, each call answered |
"""

import json
import time

import pytest

from tests.support.api import app_client, create_agent
from tests.support.sse import parse_sse

MODEL = {"model": "openai/scripted-model"}
SEARCH = ("conversation_search", {"query": "anything"})


async def send(client, agent_id: str, **options) -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": "hi", **options})
    assert response.status_code == 200, response.text
    return response.json()


async def stored(db) -> dict:
    """What the database holds after the turn, checked for half-stored steps."""
    messages = await db.fetch("SELECT role, tool_calls, tool_call_id, step_id FROM message ORDER BY seq")
    runs = [tuple(r) for r in await db.fetch("SELECT status, stop_reason FROM run")]
    steps = await db.fetch("SELECT id, status, stop_reason, error_type FROM step ORDER BY created_at")
    by_step: dict[str, tuple[set[str], set[str]]] = {}
    for message in messages:
        calls, returns = by_step.setdefault(message["step_id"], (set(), set()))
        if message["tool_calls"]:
            calls |= {call["id"] for call in json.loads(message["tool_calls"])}
        if message["role"] == "tool":
            returns.add(message["tool_call_id"])
    assert all(calls == returns for calls, returns in by_step.values()), f"a step holds an unpaired tool call: {by_step}"
    stored_steps = {step["id"] for step in steps if step["status"] == "success"}
    assert set(by_step) == stored_steps, "every stored step has its row, and every successful row its messages"
    return {
        "roles": [m["role"] for m in messages],
        "runs": runs,
        "steps": [(s["status"], s["stop_reason"], s["error_type"]) for s in steps],
    }


NOTHING_STORED = {"roles": [], "runs": [("failed", "llm_api_error")]}


@pytest.mark.parametrize(
    ("fault", "error_type"),
    [
        pytest.param(lambda llm: llm.fail(500, "upstream exploded").fail(500, "upstream exploded"), "LLMUnavailable", id="500"),
        pytest.param(
            lambda llm: llm.fail(429, "slow down", headers={"retry-after": "0.2"}).fail(429, "slow down"),
            "LLMUnavailable",
            id="429",
        ),
        pytest.param(lambda llm: llm.malformed().malformed(), "LLMUnavailable", id="body not JSON"),
        pytest.param(
            lambda llm: llm.malformed("<html>Bad Gateway</html>").malformed("{}"), "LLMUnavailable", id="not a completion"
        ),
    ],
)
async def test_a_failing_provider_ends_the_turn_with_llm_api_error_and_stores_nothing(client, llm, db, fault, error_type):
    agent = await create_agent(client, **MODEL)
    fault(llm)

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "llm_api_error" and body["messages"] == []
    assert await stored(db) == NOTHING_STORED | {"steps": [("failed", "llm_api_error", error_type)]}
    assert len(llm.requests) == 2  # llm_attempts=2: retried once


async def test_a_provider_that_times_out_ends_the_turn_with_llm_api_error(settings, llm, db):
    async with app_client(settings.model_copy(update={"llm_timeout_seconds": 0.3})) as client:
        agent = await create_agent(client, **MODEL)
        llm.hang(3).hang(3)

        body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "llm_api_error" and body["messages"] == []
    assert await stored(db) == NOTHING_STORED | {"steps": [("failed", "llm_api_error", "LLMTimeout")]}
    assert len(llm.requests) == 2


async def test_a_rate_limited_call_waits_as_asked_then_the_turn_goes_on(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.fail(429, "slow down", code="rate_limit_exceeded", headers={"retry-after": "1"}).reply("after the wait")

    started = time.monotonic()
    body = await send(client, agent["id"])
    took = time.monotonic() - started

    assert body["stop_reason"]["stop_reason"] == "end_turn" and body["messages"][-1]["content"] == "after the wait"
    assert 1.0 <= took < 4.0  # waited the second the provider asked for, no more than the backoff cap
    assert await stored(db) == {
        "roles": ["user", "assistant"],
        "runs": [("completed", "end_turn")],
        "steps": [("success", "end_turn", None)],
    }


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda llm: llm.reply("This answer never finishes.", drop_after=3), id="cut off"),
        pytest.param(lambda llm: llm.malformed('{"choices": [{"delta": {"content": "lo'), id="events not JSON"),
    ],
)
async def test_a_stream_that_breaks_half_way_ends_with_llm_api_error_and_stores_nothing(client, llm, db, fault):
    agent = await create_agent(client, **MODEL)
    fault(llm)
    llm.default("never asked: a broken stream is not retried once tokens went out")

    response = await client.post(
        f"/v1/agents/{agent['id']}/messages", json={"input": "hi", "streaming": True, "stream_tokens": True}
    )
    events = parse_sse(response.text)

    assert response.status_code == 200
    kinds = [e.get("message_type") for e in events]
    assert kinds[0] == "ping" and "assistant_message" in kinds  # tokens reached the client before the cut
    assert {"message_type": "stop_reason", "stop_reason": "llm_api_error"} in events and events[-1] == {"done": True}
    assert await stored(db) == NOTHING_STORED | {"steps": [("failed", "llm_api_error", "LLMUnavailable")]}
    assert len(llm.requests) == 1


async def test_a_failure_after_a_stored_step_keeps_that_step_whole(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})])
    llm.fail(500).fail(500)

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "llm_api_error"
    assert [m["message_type"] for m in body["messages"]] == ["tool_call_message", "tool_return_message"]
    assert await stored(db) == {
        "roles": ["user", "assistant", "tool"],
        "runs": [("failed", "llm_api_error")],
        "steps": [("success", None, None), ("failed", "llm_api_error", "LLMUnavailable")],
    }
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert block["value"].endswith("Likes tea")  # the stored step's edit stands


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('{"label": "human", "new_string": ', id="not JSON"),
        pytest.param({"label": "human"}, id="missing a required field"),
    ],
)
async def test_tool_calls_with_invalid_arguments_end_with_invalid_tool_call(client, llm, db, arguments):
    agent = await create_agent(client, **MODEL)
    for _ in range(5):
        llm.reply(tool_calls=[("memory_insert", arguments)])

    body = await send(client, agent["id"])

    assert body["stop_reason"]["stop_reason"] == "invalid_tool_call"
    returns = [m for m in body["messages"] if m["message_type"] == "tool_return_message"]
    assert len(returns) == 3 and all(r["status"] == "error" for r in returns)  # INVALID_CALL_STREAK_LIMIT
    assert await stored(db) == {
        "roles": ["user", "assistant", "tool"] + ["assistant", "tool"] * 2,
        "runs": [("failed", "invalid_tool_call")],
        "steps": [("success", None, None)] * 2 + [("success", "invalid_tool_call", None)],
    }
    block = (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human")).json()
    assert block["version"] == 1  # nothing was written


async def test_a_model_that_calls_tools_forever_stops_at_max_steps(client, llm, db):
    agent = await create_agent(client, **MODEL)
    llm.respond(lambda body: {"tool_calls": [SEARCH]})

    body = await send(client, agent["id"], max_steps=4)

    assert body["stop_reason"]["stop_reason"] == "max_steps" and body["usage"]["step_count"] == 4
    assert len(llm.requests) == 4
    assert await stored(db) == {
        "roles": ["user"] + ["assistant", "tool"] * 4,
        "runs": [("completed", "max_steps")],
        "steps": [("success", None, None)] * 4,
    }

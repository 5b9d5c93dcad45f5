"""Runs and steps over REST: what a turn leaves behind (status, stop reason, timings, usage, one
step per model call with its tokens, latencies and tool calls), the SDK's filters and cursors, and
the agent's last run."""

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}


async def turn(client, llm, agent_id: str, text: str = "I like tea") -> dict:
    response = await client.post(f"/v1/agents/{agent_id}/messages", json={"input": text})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_turn_leaves_a_run_with_one_step_per_model_call(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})], usage=(120, 8))
    llm.reply("Noted.", usage=(150, 3))

    body = await turn(client, llm, agent["id"])
    [run] = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()
    steps = (await client.get(f"/v1/runs/{run['id']}/steps")).json()
    usage = (await client.get(f"/v1/runs/{run['id']}/usage")).json()
    run_messages = (await client.get(f"/v1/runs/{run['id']}/messages")).json()
    first_step_messages = (await client.get(f"/v1/steps/{steps[0]['id']}/messages")).json()
    shown = (await client.get(f"/v1/agents/{agent['id']}")).json()

    assert run["status"] == "completed" and run["stop_reason"] == "end_turn" and run["background"] is False
    assert run["completed_at"] and run["total_duration_ns"] > 0 and 0 < run["ttft_ns"] <= run["total_duration_ns"]
    assert run["request_config"]["max_steps"] == 50
    assert usage == {"prompt_tokens": 270, "completion_tokens": 11, "total_tokens": 281}
    assert [s["tool_calls"] for s in steps] == [["memory_insert"], []]
    assert [(s["prompt_tokens"], s["completion_tokens"]) for s in steps] == [(120, 8), (150, 3)]
    assert [s["stop_reason"] for s in steps] == [None, "end_turn"]
    assert all(s["model_handle"] == "openai/scripted-model" and s["model"] == "scripted-model" for s in steps)
    assert all(s["status"] == "success" and s["model_ms"] > 0 and s["server_ms"] >= 0 for s in steps)
    step_one = ["user_message", "tool_call_message", "tool_return_message"]
    assert [m["message_type"] for m in run_messages] == [*step_one, "assistant_message"]
    assert {m["run_id"] for m in run_messages} == {run["id"]}
    assert [m["message_type"] for m in first_step_messages] == step_one
    assert all(m["step_id"] == steps[0]["id"] for m in first_step_messages)
    assert body["messages"][-1]["step_id"] == steps[1]["id"]
    assert shown["last_stop_reason"] == "end_turn" and shown["last_run_completion"] == run["completed_at"]


async def test_a_failed_model_call_is_a_failed_run_with_a_failed_step(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.fail(400, "model not allowed")

    await turn(client, llm, agent["id"])
    [run] = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()
    [step] = (await client.get("/v1/steps/", params={"agent_id": agent["id"]})).json()

    assert run["status"] == "failed" and run["stop_reason"] == "llm_api_error"
    assert (
        step["status"] == "failed"
        and step["error_type"] == "LLMRejected"
        and "model not allowed" in step["error_data"]["message"]
    )
    assert step["run_id"] == run["id"] and (await client.get(f"/v1/steps/{step['id']}")).json() == step


async def test_the_agent_shows_how_its_newest_finished_run_ended(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.fail(400, "model not allowed")
    await turn(client, llm, agent["id"])
    after_failure = (await client.get(f"/v1/agents/{agent['id']}")).json()
    llm.reply("Hello.")
    await turn(client, llm, agent["id"])
    newest = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()[0]

    shown = (await client.get(f"/v1/agents/{agent['id']}")).json()
    listed = [a for a in (await client.get("/v1/agents/")).json() if a["id"] == agent["id"]]

    assert after_failure["last_stop_reason"] == "llm_api_error"
    assert (shown["last_stop_reason"], shown["last_run_completion"]) == ("end_turn", newest["completed_at"])
    assert [(a["last_stop_reason"], a["last_run_completion"]) for a in listed] == [("end_turn", newest["completed_at"])]


async def test_filters_cursors_and_delete(client, llm):
    agent = await create_agent(client, **MODEL)
    other = await create_agent(client, **MODEL)
    for reply in ("one", "two", "three"):
        llm.reply(reply)
        await turn(client, llm, agent["id"])
    llm.fail(400, "no")
    await turn(client, llm, other["id"])

    newest_first = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()
    oldest_first = (await client.get("/v1/runs/", params={"agent_id": agent["id"], "order": "asc"})).json()
    after = (
        await client.get("/v1/runs/", params={"agent_id": agent["id"], "order": "asc", "after": oldest_first[0]["id"]})
    ).json()
    failed = (await client.get("/v1/runs/", params=[("statuses", "failed")])).json()
    by_reason = (await client.get("/v1/runs/", params={"stop_reason": "llm_api_error"})).json()
    active = (await client.get("/v1/runs/", params={"active": "true"})).json()
    finished = (await client.get("/v1/runs/", params={"active": "false", "limit": 2})).json()
    deleted = await client.delete(f"/v1/runs/{newest_first[0]['id']}")

    assert [r["id"] for r in newest_first] == [r["id"] for r in reversed(oldest_first)] and len(newest_first) == 3
    assert [r["id"] for r in after] == [r["id"] for r in oldest_first[1:]]
    assert [r["agent_id"] for r in failed] == [other["id"]] and by_reason == failed
    assert active == [] and len(finished) == 2
    assert deleted.status_code == 204
    assert (await client.get(f"/v1/runs/{newest_first[0]['id']}")).status_code == 404
    assert (await client.get("/v1/steps/", params={"agent_id": agent["id"]})).json()[0]["run_id"] != newest_first[0]["id"]
    unknown = await client.get("/v1/runs/", params={"after": "run-00000000-0000-4000-8000-000000000000"})
    assert unknown.status_code == 404 and "does not match any item" in unknown.json()["detail"]


async def test_a_stream_cursor_past_any_event_number_is_a_422_before_the_stream_starts(client, llm):
    """Found by Schemathesis (tests/fuzz/): the query failed after the stream had started, a 500."""
    agent = await create_agent(client, **MODEL)
    llm.reply("Hi.")
    run_id = (await turn(client, llm, agent["id"]))["messages"][0]["run_id"]

    refused = await client.post(f"/v1/runs/{run_id}/stream", json={"starting_after": 2**31})
    replayed = await client.post(f"/v1/runs/{run_id}/stream", json={"starting_after": 2**31 - 1})

    assert refused.status_code == 422
    assert "body.starting_after: Input should be less than or equal to 2147483647" in refused.json()["detail"]
    assert replayed.status_code == 200 and replayed.text.endswith("data: [DONE]\n\n")

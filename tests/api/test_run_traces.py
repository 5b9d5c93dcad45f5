"""What memvm serves of a run's observability: its trace (spans from what the run and its steps
record), a step's metrics, a step's provider trace (not kept: null), and feedback on a step."""

import pytest

from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}


async def two_step_run(client, llm, headers=None) -> tuple[dict, list[dict]]:
    agent = (
        await create_agent(client, **MODEL)
        if headers is None
        else (await client.post("/v1/agents/", json=MODEL, headers=headers)).json()
    )
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes tea"})], usage=(120, 8))
    llm.reply("Noted.", usage=(150, 3))
    sent = await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "I like tea"}, headers=headers)
    assert sent.status_code == 200, sent.text
    run_id = sent.json()["messages"][0]["run_id"]
    run = (await client.get(f"/v1/runs/{run_id}", headers=headers)).json()
    steps = (await client.get(f"/v1/runs/{run_id}/steps", headers=headers)).json()
    return run, steps


async def test_a_run_s_trace_is_its_run_its_first_token_and_each_step_with_its_model_call(client, llm):
    run, steps = await two_step_run(client, llm)

    spans = (await client.get(f"/v1/runs/{run['id']}/trace")).json()

    assert [(s["SpanName"], s["ParentSpanId"]) for s in spans] == [
        ("run", ""),
        ("time_to_first_token", run["id"]),
        ("agent_step", run["id"]),
        ("llm_request", steps[0]["id"]),
        ("agent_step", run["id"]),
        ("llm_request", steps[1]["id"]),
    ]
    root, ttft, first_step, first_call, *_ = spans
    assert {s["TraceId"] for s in spans} == {run["id"]}
    assert root["Duration"] == run["total_duration_ns"] and root["StatusCode"] == "Ok"
    assert root["SpanAttributes"]["stop_reason"] == "end_turn" and root["SpanAttributes"]["prompt_tokens"] == 270
    assert ttft["Duration"] == run["ttft_ns"]
    assert first_step["SpanId"] == steps[0]["id"]
    assert first_step["SpanAttributes"]["tool_calls"] == ["memory_insert"]
    assert first_step["SpanAttributes"]["prompt_tokens"] == 120 and first_step["SpanAttributes"]["completion_tokens"] == 8
    assert first_call["Duration"] == round(steps[0]["model_ms"] * 1_000_000)
    assert first_step["Duration"] == round((steps[0]["model_ms"] + steps[0]["server_ms"]) * 1_000_000)
    assert first_step["Timestamp"] <= spans[4]["Timestamp"]
    assert len((await client.get(f"/v1/runs/{run['id']}/trace", params={"limit": 2})).json()) == 2


async def test_a_failed_step_s_span_carries_its_error(client, llm):
    agent = await create_agent(client, **MODEL)
    llm.fail(400, "model not allowed")
    sent = (await client.post(f"/v1/agents/{agent['id']}/messages", json={"input": "hi"})).json()
    [run] = (await client.get("/v1/runs/", params={"agent_id": agent["id"]})).json()
    assert sent["stop_reason"]["stop_reason"] == "llm_api_error"

    spans = (await client.get(f"/v1/runs/{run['id']}/trace")).json()

    step = next(s for s in spans if s["SpanName"] == "agent_step")
    assert spans[0]["StatusCode"] == "Error" and step["StatusCode"] == "Error"
    assert step["SpanAttributes"]["error_type"] == "LLMRejected" and "model not allowed" in step["SpanAttributes"]["error"]


async def test_a_step_s_metrics_are_its_model_call_and_step_times(client, llm):
    run, steps = await two_step_run(client, llm)

    metrics = (await client.get(f"/v1/steps/{steps[1]['id']}/metrics")).json()

    assert metrics == {
        "id": steps[1]["id"],
        "agent_id": run["agent_id"],
        "run_id": run["id"],
        "llm_request_ns": round(steps[1]["model_ms"] * 1_000_000),
        "step_ns": round((steps[1]["model_ms"] + steps[1]["server_ms"]) * 1_000_000),
    }


async def test_a_step_s_provider_trace_is_null_since_memvm_does_not_keep_it(client, llm):
    _, steps = await two_step_run(client, llm)

    response = await client.get(f"/v1/steps/{steps[0]['id']}/trace")

    assert response.status_code == 200 and response.json() is None


async def test_feedback_rates_a_step_and_tags_it(client, llm):
    _, steps = await two_step_run(client, llm)
    step_url = f"/v1/steps/{steps[0]['id']}"

    rated = await client.patch(f"{step_url}/feedback", json={"feedback": "positive", "tags": ["helpful", "tea"]})
    untagged_change = await client.patch(f"{step_url}/feedback", json={"feedback": "negative"})
    stored = (await client.get(step_url)).json()
    cleared = (await client.patch(f"{step_url}/feedback", json={"feedback": None, "tags": []})).json()

    assert rated.status_code == 200 and rated.json()["feedback"] == "positive" and rated.json()["tags"] == ["helpful", "tea"]
    assert untagged_change.json()["feedback"] == "negative" and untagged_change.json()["tags"] == ["helpful", "tea"]
    assert stored["feedback"] == "negative" and stored["tags"] == ["helpful", "tea"]
    assert cleared["feedback"] is None and cleared["tags"] == ["helpful", "tea"]  # empty tags leave them (Letta's behaviour)


@pytest.mark.parametrize(
    "body",
    [{"feedback": "great"}, {"tags": "helpful"}, {"tags": [""]}, {"feedback": "positive", "rating": 5}],
)
async def test_bad_feedback_is_a_422_and_changes_nothing(client, llm, body):
    _, steps = await two_step_run(client, llm)

    response = await client.patch(f"/v1/steps/{steps[0]['id']}/feedback", json=body)

    assert response.status_code == 422, response.text
    assert "body" in response.json()["detail"]
    stored = (await client.get(f"/v1/steps/{steps[0]['id']}")).json()
    assert stored["feedback"] is None and stored["tags"] == []


async def test_bad_ids_and_limits_are_4xx(client):
    unknown_run, unknown_step = "run-00000000-0000-4000-8000-000000000000", "step-00000000-0000-4000-8000-000000000000"

    assert (await client.get(f"/v1/runs/{unknown_run}/trace")).status_code == 404
    assert (await client.get(f"/v1/runs/{unknown_run}/trace", params={"limit": 0})).status_code == 422
    assert (await client.get("/v1/runs/nonsense/trace")).status_code == 422
    for path in ("metrics", "trace"):
        assert (await client.get(f"/v1/steps/{unknown_step}/{path}")).status_code == 404
    assert (await client.patch(f"/v1/steps/{unknown_step}/feedback", json={"feedback": "positive"})).status_code == 404


async def test_another_organization_s_runs_and_steps_are_404(keyed, llm):
    client, (a, b) = keyed
    run, steps = await two_step_run(client, llm, headers=a)
    step_id = steps[0]["id"]

    answers = [
        await client.get(f"/v1/runs/{run['id']}/trace", headers=b),
        await client.get(f"/v1/steps/{step_id}/metrics", headers=b),
        await client.get(f"/v1/steps/{step_id}/trace", headers=b),
        await client.patch(f"/v1/steps/{step_id}/feedback", json={"feedback": "negative", "tags": ["b"]}, headers=b),
    ]

    assert [answer.status_code for answer in answers] == [404] * 4
    stored = (await client.get(f"/v1/steps/{step_id}", headers=a)).json()
    assert stored["feedback"] is None and stored["tags"] == []

"""The rest of the SDK's surface through the official client: tags.list, messages.list,
agents.tools.run, runs.trace, steps.trace / metrics / feedback; and a Letta Cloud route's 501."""

import pytest
from letta_client import AsyncLetta, InternalServerError

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import new_agent


async def test_the_sdk_lists_the_organization_s_tags(letta: AsyncLetta):
    await new_agent(letta, tags=["sdk-tag-b", "sdk-tag-a"])
    await letta.blocks.create(label="notes", value="x", tags=["sdk-tag-c"])

    listed = await letta.tags.list(name="sdk-tag")
    after_a = await letta.tags.list(name="sdk-tag", after="sdk-tag-a", limit=1)

    assert listed == ["sdk-tag-a", "sdk-tag-b", "sdk-tag-c"]
    assert after_a == ["sdk-tag-b"]


async def test_the_sdk_lists_every_agent_s_messages(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Tea it is.")
    await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "tea please"}])

    newest = await letta.messages.list(limit=2)
    said = await letta.messages.list(include_return_message_types=["assistant_message"], limit=1)

    assert [m.message_type for m in newest] == ["assistant_message", "user_message"]
    assert said[0].content == "Tea it is."


async def test_the_sdk_runs_an_agent_s_tool(letta: AsyncLetta):
    agent = await new_agent(letta, tools=["memory_insert"])

    result = await letta.agents.tools.run("memory_insert", agent_id=agent.id, args={"label": "human", "new_string": "Likes tea"})
    block = await letta.agents.blocks.retrieve("human", agent_id=agent.id)

    assert result.status == "success" and "Likes tea" in block.value


async def test_the_sdk_reads_a_run_s_trace_and_a_step_s_metrics_trace_and_feedback(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Noted.", usage=(40, 2))
    await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "hi"}])
    [run] = (await letta.runs.list(agent_id=agent.id)).items
    [step] = (await letta.runs.steps.list(run.id)).items

    spans = await letta.runs.trace.retrieve(run.id)
    metrics = await letta.steps.metrics.retrieve(step.id)
    provider_trace = await letta.steps.trace.retrieve(step.id)
    rated = await letta.steps.feedback.create(step.id, feedback="positive", tags=["good"])

    assert [span["SpanName"] for span in spans] == ["run", "time_to_first_token", "agent_step", "llm_request"]
    assert metrics.id == step.id and metrics.run_id == run.id and metrics.llm_request_ns and metrics.step_ns
    assert provider_trace is None
    assert rated.feedback == "positive" and rated.tags == ["good"]
    assert (await letta.steps.retrieve(step.id)).feedback == "positive"


async def test_a_letta_cloud_route_is_a_501_that_says_so(letta: AsyncLetta):
    with pytest.raises(InternalServerError) as refused:
        await letta.templates.create(agent_id="agent-1", type="agent")

    assert refused.value.status_code == 501
    assert "Agent templates is a Letta Cloud feature" in str(refused.value)

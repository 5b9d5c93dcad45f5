"""Runs, steps and models through the official SDK: runs.list / retrieve / messages / steps / usage,
steps.list / retrieve / messages and models.list parse what memvm returns."""

import asyncio

from letta_client import AsyncLetta
from letta_client.types import ToolReturnMessage

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import new_agent


async def test_the_sdk_reads_a_turns_run_and_steps(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})], usage=(90, 6))
    llm.reply("Noted.", usage=(110, 2))
    await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I like tea"}])

    [run] = (await letta.runs.list(agent_id=agent.id)).items
    retrieved = await letta.runs.retrieve(run.id)
    messages = (await letta.runs.messages.list(run.id)).items
    steps = (await letta.runs.steps.list(run.id)).items
    usage = await letta.runs.usage.retrieve(run.id)
    step = await letta.steps.retrieve(steps[0].id)
    listed = (await letta.steps.list(agent_id=agent.id, order="asc")).items
    step_messages = (await letta.steps.messages.list(steps[0].id)).items
    shown = await letta.agents.retrieve(agent.id)

    assert run.status == "completed" and run.stop_reason == "end_turn" and retrieved.id == run.id
    assert run.total_duration_ns and run.ttft_ns
    assert any(isinstance(m, ToolReturnMessage) for m in messages)
    assert [s.id for s in steps] == [s.id for s in listed] and len(steps) == 2
    assert (step.prompt_tokens, step.completion_tokens, step.run_id) == (90, 6, run.id)
    assert step.api_model_handle == "openai/scripted-model" and step.status == "success"
    assert usage.total_tokens == 208
    assert len(step_messages) >= 2
    assert shown.last_stop_reason == "end_turn" and shown.last_run_completion is not None
    assert await letta.agents.messages.cancel(agent.id) == {}  # nothing left running


async def test_the_sdk_lists_chat_and_embedding_models(letta: AsyncLetta):
    models = await letta.models.list()
    embeddings = await letta.models.embeddings.list()

    assert "openai/scripted-model" in [model.handle for model in models]
    assert all(model.context_window > 0 and model.provider_type for model in models)
    assert embeddings[0].embedding_dim == 384


async def test_the_sdk_runs_a_turn_in_the_background_and_polls_it(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Done in the background.", delay=1.0)

    run = await letta.agents.messages.create_async(agent.id, messages=[{"role": "user", "content": "take your time"}])
    while (polled := await letta.runs.retrieve(run.id)).status in ("created", "running"):
        await asyncio.sleep(0.1)
    messages = (await letta.runs.messages.list(run.id)).items
    listed = (await letta.runs.list(agent_id=agent.id, background=True)).items

    assert run.background and polled.status == "completed" and polled.stop_reason == "end_turn"
    assert messages[-1].content == "Done in the background."
    assert [r.id for r in listed] == [run.id]


async def test_the_sdk_cancels_a_background_run(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    requests_before = len(llm.requests)
    llm.reply("too late", delay=20.0).reply("after the cancel")

    run = await letta.agents.messages.create_async(agent.id, messages=[{"role": "user", "content": "slow one"}])
    while len(llm.requests) == requests_before:  # the turn waits on the model
        await asyncio.sleep(0.05)
    cancelled = await letta.agents.messages.cancel(agent.id)
    while (polled := await letta.runs.retrieve(run.id)).status in ("created", "running"):
        await asyncio.sleep(0.1)
    after = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "still there?"}])

    assert cancelled == {run.id: "cancelled"}
    assert polled.status == "cancelled" and polled.stop_reason == "cancelled"
    assert after.messages[-1].content == "after the cancel"


async def test_the_sdk_resumes_a_background_runs_stream_from_a_cursor(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Streamed from the store.", delay=0.5)

    run = await letta.agents.messages.create_async(agent.id, messages=[{"role": "user", "content": "hi"}])
    everything = [event async for event in await letta.runs.messages.stream(run.id)]
    rest = [event async for event in await letta.runs.messages.stream(run.id, starting_after=1)]

    kinds = [event.message_type for event in everything]
    assert kinds[:2] == ["assistant_message", "stop_reason"] and everything[0].content == "Streamed from the store."
    assert [event.message_type for event in rest] == kinds[1:]

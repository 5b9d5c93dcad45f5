"""Turns, streaming, history, reset, compaction and agent tools through the official SDK.

The model is the module's ScriptedLLM: each test queues the replies its turn needs and reads
what memvm sent to the model from `llm.requests`.
"""

import json

import pytest
from letta_client import APIStatusError, AsyncLetta
from letta_client.types import ToolReturnMessage
from letta_client.types.agents import (
    AssistantMessage,
    LettaResponse,
    ToolCallMessage,
    UserMessage,
)
from letta_client.types.agents.letta_streaming_response import LettaPing, LettaStopReason, LettaUsageStatistics

from tests.support.scripted_llm import ScriptedLLM
from tests.support.sdk import memory_value, new_agent

BASE_TOOLS = ["conversation_search", "memory_insert", "memory_replace"]


def system_prompt_of(request: dict) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


async def test_create_runs_a_tool_call_then_answers(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Likes: tea"})], usage=(200, 10))
    llm.reply("Noted: you like tea.", usage=(230, 6))

    response = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I like tea"}])

    assert isinstance(response, LettaResponse)
    call, result, answer = response.messages
    assert isinstance(call, ToolCallMessage) and call.message_type == "tool_call_message"
    assert call.tool_call.name == "memory_insert"
    assert json.loads(call.tool_call.arguments) == {"label": "human", "new_string": "Likes: tea"}
    assert call.tool_call.tool_call_id
    assert [c.name for c in call.tool_calls] == ["memory_insert"]
    assert isinstance(result, ToolReturnMessage) and result.message_type == "tool_return_message"
    assert result.status == "success"
    assert result.tool_call_id == call.tool_call.tool_call_id
    assert "Likes: tea" in result.tool_return
    assert isinstance(answer, AssistantMessage) and answer.content == "Noted: you like tea."
    assert all(message.id.startswith("message-") for message in response.messages)
    assert response.stop_reason.stop_reason == "end_turn"
    assert response.usage.step_count == 2
    assert response.usage.prompt_tokens == 430
    assert response.usage.completion_tokens == 16
    assert response.usage.total_tokens == 446

    # The model saw the user's text and was offered the agent's tools.
    first = llm.requests[0]
    assert first["messages"][-1] == {"role": "user", "content": "I like tea"}
    assert sorted(tool["function"]["name"] for tool in first["tools"]) == BASE_TOOLS
    block = await letta.agents.blocks.retrieve("human", agent_id=agent.id)
    assert block.value == "Name: Bob\nLikes: tea"


async def test_create_accepts_input_shorthand(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Hello!")

    response = await letta.agents.messages.create(agent.id, input="hi there")

    assert [type(message) for message in response.messages] == [AssistantMessage]
    assert response.messages[0].content == "Hello!"
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "hi there"}


async def test_create_accepts_content_parts_and_filters_return_types(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Owns a bike"})]).reply("Cool bike.")

    response = await letta.agents.messages.create(
        agent.id,
        messages=[{"role": "user", "content": [{"type": "text", "text": "I own a bike"}]}],
        include_return_message_types=["assistant_message"],
    )

    assert [type(message) for message in response.messages] == [AssistantMessage]
    assert response.messages[0].content == "Cool bike."
    assert response.usage.step_count == 2
    assert "I own a bike" in json.dumps(llm.requests[0]["messages"][-1])


async def test_create_streaming_yields_typed_chunks_ending_with_stop_and_usage(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Has a cat"})])
    llm.reply("I will remember your cat.")

    stream = await letta.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I have a cat"}], streaming=True)
    chunks = [chunk async for chunk in stream]

    assert [chunk.message_type for chunk in chunks] == [
        "ping",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "stop_reason",
        "usage_statistics",
    ]
    assert [type(chunk) for chunk in chunks[1:]] == [
        ToolCallMessage,
        ToolReturnMessage,
        AssistantMessage,
        LettaStopReason,
        LettaUsageStatistics,
    ]
    assert chunks[1].tool_call.name == "memory_insert"
    assert chunks[2].status == "success" and chunks[2].tool_call_id == chunks[1].tool_call.tool_call_id
    assert chunks[3].content == "I will remember your cat."
    assert chunks[4].stop_reason == "end_turn"
    assert chunks[5].step_count == 2 and chunks[5].total_tokens > 0
    # What was streamed is what was stored.
    history = (await letta.agents.messages.list(agent.id, limit=3)).items
    assert [(m.message_type, m.id) for m in history] == [(c.message_type, c.id) for c in chunks[1:4]]


async def test_ping_chunk_is_a_letta_ping(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("pong")

    chunks = [chunk async for chunk in await letta.agents.messages.create(agent.id, input="ping?", streaming=True)]

    ping = chunks[0]
    assert isinstance(ping, LettaPing), f"{type(ping).__name__}: {ping!r}"
    assert ping.id and ping.date is not None and ping.run_id and ping.run_id.startswith("run-")


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # messages.stream is deprecated in the SDK
async def test_stream_route_without_pings(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Streaming hello.")

    stream = await letta.agents.messages.stream(agent.id, input="hi", include_pings=False)
    chunks = [chunk async for chunk in stream]

    assert [type(chunk) for chunk in chunks] == [AssistantMessage, LettaStopReason, LettaUsageStatistics]
    assert chunks[0].content == "Streaming hello."
    assert chunks[1].stop_reason == "end_turn"
    assert chunks[2].step_count == 1


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # messages.stream is deprecated in the SDK
@pytest.mark.parametrize("route", ["create", "stream"])
async def test_stream_tokens_arrive_as_fragments_of_one_message(letta: AsyncLetta, llm: ScriptedLLM, route: str):
    agent = await new_agent(letta)
    llm.reply("The quick brown fox jumps over the lazy dog")

    if route == "create":
        stream = await letta.agents.messages.create(agent.id, input="hi", streaming=True, stream_tokens=True, include_pings=False)
    else:  # the /messages/stream route, which the SDK calls without `streaming`
        stream = await letta.agents.messages.stream(agent.id, input="hi", stream_tokens=True, include_pings=False)
    chunks = [chunk async for chunk in stream]

    pieces = [chunk for chunk in chunks if isinstance(chunk, AssistantMessage)]
    assert len(pieces) > 1
    assert "".join(piece.content for piece in pieces) == "The quick brown fox jumps over the lazy dog"
    assert len({piece.id for piece in pieces}) == 1
    assert isinstance(chunks[-2], LettaStopReason) and isinstance(chunks[-1], LettaUsageStatistics)


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # messages.stream is deprecated in the SDK
async def test_streamed_memory_edit_reaches_the_next_turns_system_prompt(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_replace", {"label": "human", "old_string": "Name: Bob", "new_string": "Name: Robert"})])
    llm.reply("Got it, Robert.")
    llm.reply("You are Robert.")

    first = [chunk async for chunk in await letta.agents.messages.stream(agent.id, input="Call me Robert")]
    returns = [chunk for chunk in first if isinstance(chunk, ToolReturnMessage)]
    assert [r.status for r in returns] == ["success"]
    assert first[-2].stop_reason == "end_turn"

    second = [chunk async for chunk in await letta.agents.messages.stream(agent.id, input="Who am I?")]
    assert [c.content for c in second if isinstance(c, AssistantMessage)] == ["You are Robert."]

    before, same_turn, next_turn = (system_prompt_of(request) for request in llm.requests)
    assert memory_value(before, "human") == "Name: Bob"
    assert memory_value(same_turn, "human") == "Name: Bob"  # a turn keeps the prompt it started with
    assert memory_value(next_turn, "human") == "Name: Robert"
    assert (await letta.agents.blocks.retrieve("human", agent_id=agent.id)).value == "Name: Robert"


async def test_list_returns_the_history_in_order(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Plays chess"})]).reply("Saved.")
    llm.reply("Second answer.")
    sent = await letta.agents.messages.create(agent.id, input="I play chess")
    await letta.agents.messages.create(agent.id, input="second question")

    page = await letta.agents.messages.list(agent.id)
    history = page.items

    kinds = [message.message_type for message in history]
    assert kinds[-6:] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "user_message",
        "assistant_message",
    ]
    assert all(kind in {"system_message", "user_message"} for kind in kinds[:-6])
    assert [type(message) for message in history[-6:]] == [
        UserMessage,
        ToolCallMessage,
        ToolReturnMessage,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
    ]
    assert isinstance(history[-6], UserMessage) and history[-6].content == "I play chess"
    assert [m.id for m in history[-5:-2]] == [m.id for m in sent.messages]
    assert history[-1].content == "Second answer."
    assert [message.id for message in history] == [message.id for message in sorted(history, key=lambda m: m.date)]

    newest = (await letta.agents.messages.list(agent.id, limit=2)).items
    assert [m.id for m in newest] == [m.id for m in history[-2:]]
    oldest = (await letta.agents.messages.list(agent.id, limit=2, order="asc")).items
    assert [m.id for m in oldest] == [m.id for m in history[:2]]
    only_assistant = (await letta.agents.messages.list(agent.id, include_return_message_types=["assistant_message"])).items
    assert [m.content for m in only_assistant] == ["Saved.", "Second answer."]
    every = [message.id async for message in letta.agents.messages.list(agent.id, limit=3, order="asc")]
    assert every == [message.id for message in history]


async def test_reset_empties_the_context_window_but_keeps_history(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("First.").reply("After reset.")
    await letta.agents.messages.create(agent.id, input="remember this sentence")
    before = [m.id for m in (await letta.agents.messages.list(agent.id)).items]

    reset = await letta.agents.messages.reset(agent.id)

    assert reset is not None and reset.id == agent.id
    await letta.agents.messages.create(agent.id, input="fresh start")
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[-1]["content"] == "fresh start"
    assert "remember this sentence" not in json.dumps(sent)
    after = [m.id for m in (await letta.agents.messages.list(agent.id)).items]
    assert set(before) - set(after) <= {before[0]}  # old messages are still listed (the system one may be rebuilt)


async def test_compact_summarizes_the_window(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.reply("Nice to meet you.").reply("Paris is lovely.")
    await letta.agents.messages.create(agent.id, input="My name is Bob")
    await letta.agents.messages.create(agent.id, input="I live in Paris")
    llm.reply("Bob introduced himself and said he lives in Paris.")  # the summary
    llm.reply("You live in Paris.")

    compacted = await letta.agents.messages.compact(agent.id)

    assert compacted.summary == "Bob introduced himself and said he lives in Paris."
    assert compacted.num_messages_before > compacted.num_messages_after >= 1
    await letta.agents.messages.create(agent.id, input="Where do I live?")
    sent = llm.requests[-1]["messages"]
    assert "Bob introduced himself and said he lives in Paris." in json.dumps(sent)
    assert "I live in Paris" not in [m.get("content") for m in sent]


async def test_agent_tools_list_attach_detach(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    all_tools = [tool async for tool in letta.tools.list()]
    by_name = {tool.name: tool for tool in all_tools}
    assert set(BASE_TOOLS) <= set(by_name)
    assert "core_memory_append" in by_name
    assert all(tool.id.startswith("tool-") for tool in all_tools)
    assert by_name["memory_replace"].json_schema["name"] == "memory_replace"

    attached_tools = [tool async for tool in letta.agents.tools.list(agent.id)]
    assert sorted(tool.name for tool in attached_tools) == BASE_TOOLS

    append = by_name["core_memory_append"]
    attached = await letta.agents.tools.attach(append.id, agent_id=agent.id)
    assert attached is None or attached.id == agent.id
    names = sorted([tool.name async for tool in letta.agents.tools.list(agent.id)])
    assert names == sorted([*BASE_TOOLS, "core_memory_append"])
    llm.reply("ok")
    await letta.agents.messages.create(agent.id, input="hi")
    assert "core_memory_append" in [tool["function"]["name"] for tool in llm.requests[-1]["tools"]]

    conversation_search = by_name["conversation_search"]
    detached = await letta.agents.tools.detach(conversation_search.id, agent_id=agent.id)
    assert detached is None or detached.id == agent.id
    names = sorted([tool.name async for tool in letta.agents.tools.list(agent.id)])
    assert names == ["core_memory_append", "memory_insert", "memory_replace"]
    llm.reply("ok")
    await letta.agents.messages.create(agent.id, input="hi again")
    assert sorted(tool["function"]["name"] for tool in llm.requests[-1]["tools"]) == names


async def test_model_failure_mid_stream_arrives_in_band_as_an_sdk_error(letta: AsyncLetta, llm: ScriptedLLM):
    agent = await new_agent(letta)
    llm.fail(500, "upstream exploded").fail(500, "upstream exploded")  # memvm is started with 2 attempts

    stream = await letta.agents.messages.create(agent.id, input="hi", streaming=True)
    chunks = []
    with pytest.raises(APIStatusError) as raised:
        async for chunk in stream:
            chunks.append(chunk)

    # memvm also sends usage before the error event (Letta sends stop_reason, then the error).
    assert [chunk.message_type for chunk in chunks] in (["ping", "stop_reason"], ["ping", "stop_reason", "usage_statistics"])
    assert isinstance(chunks[1], LettaStopReason) and chunks[1].stop_reason == "llm_api_error"
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["message_type"] == "error_message"
    assert "upstream exploded" in raised.value.body["message"]


async def test_custom_tool_from_source_through_the_sdk(letta: AsyncLetta):
    source = (
        'def shout(text: str) -> str:\n    """Say it louder.\n\n    Args:\n        text: What to say.\n    """\n'
        "    return text.upper()\n"
    )

    created = await letta.tools.create(source_code=source, tags=["sdk"])
    upserted = await letta.tools.upsert(source_code=source.replace("louder", "much louder"))
    listed = [tool.name async for tool in letta.tools.list(tool_types=["custom"])]
    await letta.tools.delete(created.id)

    assert created.name == "shout" and created.tool_type == "custom" and created.tags == ["sdk"]
    assert created.json_schema["parameters"]["properties"]["text"] == {"type": "string", "description": "What to say."}
    assert upserted.id == created.id and upserted.description == "Say it much louder."
    assert "shout" in listed
    assert "shout" not in [tool.name async for tool in letta.tools.list(tool_types=["custom"])]

"""Without usage from the provider, a turn counts its prompt tokens from its own estimate of each
request: the estimate must cover exactly what was sent, history included, step after step."""

from memvm.llm.types import ChatMessage, ToolCall, ToolSpec
from memvm.runtime.loop.tokens import estimate_message, estimate_tools
from tests.support.api import create_agent

MODEL = {"model": "openai/scripted-model"}


def estimate_of(sent: dict) -> int:
    """runtime/loop/tokens.py's estimate of a chat-completions request body as the model received it."""
    messages = [
        ChatMessage(
            message["role"],
            message.get("content"),
            tool_calls=tuple(
                ToolCall(call["id"], call["function"]["name"], call["function"]["arguments"])
                for call in message.get("tool_calls") or ()
            ),
            tool_call_id=message.get("tool_call_id"),
        )
        for message in sent["messages"]
    ]
    tools = [
        ToolSpec(tool["function"]["name"], tool["function"].get("description", ""), tool["function"]["parameters"])
        for tool in sent.get("tools") or ()
    ]
    return sum(estimate_message(message) for message in messages) + estimate_tools(tools)


async def test_a_turn_without_reported_usage_counts_the_estimate_of_every_request_it_sent(client, llm):
    agent = await create_agent(client, **MODEL)
    send = f"/v1/agents/{agent['id']}/messages"
    for text in ("My name is Ada.", "I keep bees in the garden."):  # history to carry
        llm.reply("Noted.", usage=False)
        assert (await client.post(send, json={"input": text})).status_code == 200
    llm.reply(tool_calls=[("memory_insert", {"label": "human", "new_string": "Keeps bees"})], usage=False)
    llm.reply("Saved.", usage=False)

    body = (await client.post(send, json={"input": "Please remember the bees."})).json()

    first_step, second_step = llm.requests[-2:]
    assert body["usage"]["step_count"] == 2
    assert body["usage"]["prompt_tokens"] == estimate_of(first_step) + estimate_of(second_step)
    assert len(second_step["messages"]) > len(first_step["messages"]) > 3  # both carried the history

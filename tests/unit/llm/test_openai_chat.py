"""OpenAIChatModel against a scripted OpenAI-compatible server, through the real openai SDK."""

import json
from collections.abc import AsyncIterator

import pytest

from memvm.errors import ContextWindowExceeded, LLMRejected, LLMTimeout, LLMUnavailable
from memvm.llm import openai_chat
from memvm.llm.openai_chat import ChatModelFactory, OpenAIChatModel, RetryPolicy
from memvm.llm.types import ChatMessage, Completion, Endpoint, ModelRequest, TextDelta, ToolCall, ToolSpec, Usage
from tests.support.scripted_llm import ScriptedLLM

MODEL = "scripted-gpt"
SEND_MESSAGE = ToolSpec(
    name="send_message",
    description="Say something to the user.",
    parameters={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)


def ask(text: str = "Hi there", **options) -> ModelRequest:
    messages = [ChatMessage("system", "You are terse."), ChatMessage("user", text)]
    return ModelRequest(model=MODEL, messages=messages, **options)


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM() as server:
        yield server


def recording_sleep(sleeps: list[float]):
    """A stand-in for asyncio.sleep that notes the backoff delay and returns at once."""

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return sleep


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
async def factory(llm: ScriptedLLM, sleeps: list[float]) -> AsyncIterator[ChatModelFactory]:
    built = ChatModelFactory(
        default_base_url=llm.base_url,
        default_api_key=None,
        retry=RetryPolicy(base_delay=0.01),
        sleep=recording_sleep(sleeps),
    )
    yield built
    await built.aclose()


@pytest.fixture
def model(factory: ChatModelFactory) -> OpenAIChatModel:
    return factory.for_endpoint(Endpoint(base_url=None))


async def collect(model: OpenAIChatModel, request: ModelRequest) -> tuple[list[str], Completion]:
    events = [event async for event in model.stream(request)]
    *deltas, final = events
    assert all(isinstance(d, TextDelta) for d in deltas)
    assert isinstance(final, Completion)
    return [d.text for d in deltas], final


# ---------------------------------------------------------------- answers


async def test_plain_answer(llm, model):
    llm.reply("Hello!")
    completion = await model.complete(ask())
    assert completion.content == "Hello!"
    assert completion.tool_calls == ()
    assert completion.finish_reason == "stop"
    assert completion.reasoning is None


async def test_tool_calls_keep_arguments_verbatim_even_when_malformed(llm, model):
    llm.reply(tool_calls=[("send_message", {"message": "hi"}), ("core_memory_append", '{"label": "human", ')])
    completion = await model.complete(ask(tools=[SEND_MESSAGE]))
    assert completion.content is None
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls == (
        ToolCall(id="call_1", name="send_message", arguments='{"message": "hi"}'),
        ToolCall(id="call_2", name="core_memory_append", arguments='{"label": "human", '),
    )


async def test_usage_and_reasoning_are_mapped(llm, model):
    llm.reply("42", usage=(120, 7), reasoning="Adding it up.")
    completion = await model.complete(ask())
    assert completion.usage == Usage(prompt_tokens=120, completion_tokens=7, total_tokens=127)
    assert completion.reasoning == "Adding it up."


async def test_request_carries_history_tools_and_choices(llm, model):
    llm.reply("done")
    call = ToolCall(id="call_9", name="send_message", arguments='{"message": "hey"}')
    history = [
        ChatMessage("system", "You are terse."),
        ChatMessage("user", "Greet me"),
        ChatMessage("assistant", None, tool_calls=(call,)),
        ChatMessage("tool", '{"status": "OK"}', tool_call_id="call_9"),
    ]
    request = ModelRequest(model=MODEL, messages=history, tools=[SEND_MESSAGE], tool_choice="required", max_tokens=256)
    await model.complete(request)

    [sent] = llm.requests
    assert sent["model"] == MODEL
    assert sent["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Greet me"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "send_message", "arguments": call.arguments}}
            ],
        },
        {"role": "tool", "content": '{"status": "OK"}', "tool_call_id": "call_9"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "send_message",
                "description": SEND_MESSAGE.description,
                "parameters": SEND_MESSAGE.parameters,
            },
        }
    ]
    assert sent["tool_choice"] == "required"
    assert sent["max_tokens"] == 256
    assert not sent.get("stream")


async def test_request_without_tools_omits_tool_fields(llm, model):
    llm.reply("fine")
    await model.complete(ask(tool_choice="auto"))
    [sent] = llm.requests
    assert "tools" not in sent and "tool_choice" not in sent and "max_tokens" not in sent


async def test_a_growing_history_is_sent_whole_each_time_and_each_message_keeps_its_json(llm, model):
    llm.reply("one").reply("two")
    history = [ChatMessage("system", "Sé breve."), ChatMessage("user", "Grüß mich 👋")]
    await model.complete(ModelRequest(model=MODEL, messages=history))
    history += [ChatMessage("assistant", "Hallo!"), ChatMessage("user", "Noch einmal")]
    await model.complete(ModelRequest(model=MODEL, messages=history))

    first, second = llm.requests
    wire = [{"role": m.role, "content": m.content} for m in history]
    assert (first["messages"], second["messages"]) == (wire[:2], wire)
    assert llm.request_headers[1]["content-type"] == "application/json"
    kept = [message.__dict__.get(openai_chat._KEPT_JSON) for message in history]
    assert [json.loads(encoded) for encoded in kept] == wire  # what was sent, kept with each message
    assert history[0] == ChatMessage("system", "Sé breve.")  # equality and hashing ignore it
    assert len({*history, ChatMessage("user", "Grüß mich 👋")}) == len(history)


# ---------------------------------------------------------------- streaming


async def test_stream_text_deltas_add_up_to_the_final_content(llm, model):
    llm.reply("The quick brown fox jumps.", usage=(30, 6), reasoning="Think first.")
    pieces, final = await collect(model, ask())
    assert len(pieces) > 1
    assert "".join(pieces) == final.content == "The quick brown fox jumps."
    assert final.finish_reason == "stop"
    assert final.usage == Usage(30, 6, 36)
    assert final.reasoning == "Think first."
    [sent] = llm.requests
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_stream_assembles_tool_calls_from_pieces(llm, model):
    llm.reply("Noting that.", tool_calls=[("send_message", {"message": "a longer message, split"}), ("noop", "{oops")])
    pieces, final = await collect(model, ask(tools=[SEND_MESSAGE]))
    assert "".join(pieces) == "Noting that."
    assert final.tool_calls == (
        ToolCall(id="call_1", name="send_message", arguments='{"message": "a longer message, split"}'),
        ToolCall(id="call_2", name="noop", arguments="{oops"),
    )
    assert final.finish_reason == "tool_calls"


async def test_stream_retries_a_failure_before_the_first_chunk(llm, model, sleeps):
    llm.fail(503, "warming up").reply("ready")
    pieces, final = await collect(model, ask())
    assert final.content == "ready" == "".join(pieces)
    assert len(llm.requests) == 2 and len(sleeps) == 1


async def test_stream_cut_off_midway_raises_without_retry(llm, model):
    llm.reply("This answer never finishes.", drop_after=3).default("should not be asked")
    received = []
    with pytest.raises(LLMUnavailable, match=f"{MODEL}.*while streaming"):
        async for event in model.stream(ask()):
            received.append(event)
    assert received and all(isinstance(e, TextDelta) for e in received)
    assert len(llm.requests) == 1


# ---------------------------------------------------------------- failures


async def test_server_error_then_success_is_retried(llm, model, sleeps):
    llm.fail(500).reply("recovered")
    assert (await model.complete(ask())).content == "recovered"
    assert len(llm.requests) == 2
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.01


async def test_server_errors_exhaust_the_retry_budget(llm, model, sleeps):
    for _ in range(3):
        llm.fail(500, "upstream exploded")
    with pytest.raises(LLMUnavailable) as caught:
        await model.complete(ask())
    message = caught.value.message
    assert MODEL in message and llm.base_url in message and "upstream exploded" in message and "3 attempts" in message
    assert len(llm.requests) == 3 and len(sleeps) == 2


MALFORMED_BODIES = [
    '{"id": "chatcmpl-1", "choi',
    "<html>Bad Gateway</html>",
    "{}",
    '{"choices": null}',
    "[]",
    '{"choices": [1]}',
    '{"choices": [{"index": 0, "finish_reason": "stop"}]}',
    '{"choices": [{"index": 0, "message": "hello"}]}',
]


@pytest.mark.parametrize("body", MALFORMED_BODIES)
async def test_a_malformed_body_is_retried_like_a_server_error(llm, model, sleeps, body):
    llm.malformed(body).reply("readable")
    assert (await model.complete(ask())).content == "readable"
    assert len(llm.requests) == 2 and len(sleeps) == 1


async def test_malformed_bodies_exhaust_the_retry_budget(llm, model, sleeps):
    for _ in range(3):
        llm.malformed()
    with pytest.raises(LLMUnavailable, match=f"{MODEL}.*malformed response after 3 attempts: not JSON"):
        await model.complete(ask())


async def test_a_malformed_stream_event_raises_without_retry(llm, model):
    llm.malformed('{"choices": [{"delta": {"content": "lo').default("should not be asked")
    received = []
    with pytest.raises(LLMUnavailable, match=f"{MODEL}.*malformed response while streaming"):
        async for event in model.stream(ask()):
            received.append(event)
    assert received == [TextDelta("Hel")] and len(llm.requests) == 1


@pytest.mark.parametrize(
    ("header", "expected"),
    [({"Retry-After": "2"}, 2.0), ({"Retry-After": "600"}, 8.0), ({"retry-after-ms": "1500"}, 1.5)],
)
async def test_rate_limit_honours_retry_after_within_max_delay(llm, model, sleeps, header, expected):
    llm.fail(429, "slow down", code="rate_limit_exceeded", headers=header).reply("ok now")
    assert (await model.complete(ask())).content == "ok now"
    assert sleeps == [expected]


async def test_context_overflow_is_not_retried(llm, model):
    llm.fail(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")
    with pytest.raises(ContextWindowExceeded, match="maximum context length is 8192") as caught:
        await model.complete(ask())
    assert MODEL in caught.value.message
    assert len(llm.requests) == 1


async def test_context_overflow_is_recognised_by_message_alone(llm, model):
    llm.fail(400, "This model's maximum context length is 4096 tokens, you asked for 5000.")
    with pytest.raises(ContextWindowExceeded):
        await model.complete(ask())


async def test_auth_failure_is_rejected_without_retry(llm, model):
    llm.fail(401, "Incorrect API key provided", code="invalid_api_key")
    with pytest.raises(LLMRejected, match="HTTP 401.*Incorrect API key provided") as caught:
        await model.complete(ask())
    assert MODEL in caught.value.message
    assert len(llm.requests) == 1


async def test_unknown_model_is_rejected(llm, model):
    llm.fail(404, f"The model `{MODEL}` does not exist", code="model_not_found")
    with pytest.raises(LLMRejected, match="does not exist"):
        await model.complete(ask())


async def test_hang_past_the_timeout_raises_llm_timeout_after_all_attempts(llm, sleeps):
    factory = ChatModelFactory(
        default_base_url=llm.base_url,
        default_api_key=None,
        retry=RetryPolicy(timeout=0.3, attempts=2, base_delay=0.01),
        sleep=recording_sleep(sleeps),
    )
    llm.hang(3).hang(3)
    try:
        with pytest.raises(LLMTimeout, match=f"{MODEL}.*timed out after 2 attempts"):
            await factory.for_endpoint(Endpoint(base_url=None)).complete(ask())
    finally:
        await factory.aclose()
    assert len(llm.requests) == 2 and len(sleeps) == 1


async def test_unreachable_server_is_unavailable(sleeps):
    async with ScriptedLLM() as gone:
        url = gone.base_url
    factory = ChatModelFactory(
        default_base_url=url, default_api_key=None, retry=RetryPolicy(attempts=2), sleep=recording_sleep(sleeps)
    )
    try:
        with pytest.raises(LLMUnavailable, match="Could not reach LLM"):
            await factory.for_endpoint(Endpoint(base_url=None)).complete(ask())
    finally:
        await factory.aclose()
    assert len(sleeps) == 1


# ---------------------------------------------------------------- factory


async def test_factory_shares_a_client_per_url_and_key_and_fills_in_keys(llm, factory):
    llm.default("hi")
    keyless = factory.for_endpoint(Endpoint(base_url=None))
    explicit = factory.for_endpoint(Endpoint(base_url=llm.base_url, api_key="sk-endpoint"))
    assert factory.for_endpoint(Endpoint(base_url=None))._client is keyless._client
    assert explicit._client is not keyless._client

    await keyless.complete(ask())
    await explicit.complete(ask())
    assert [h["authorization"] for h in llm.request_headers] == ["Bearer not-needed", "Bearer sk-endpoint"]


async def test_factory_default_api_key_is_used(llm):
    llm.reply("hi")
    factory = ChatModelFactory(default_base_url=llm.base_url, default_api_key="sk-default")
    try:
        await factory.for_endpoint(Endpoint(base_url=None)).complete(ask())
    finally:
        await factory.aclose()
    assert llm.request_headers[0]["authorization"] == "Bearer sk-default"

"""ChatModel over any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp, …).

It maps memvm.llm.types to the wire format and back; memvm.provider builds the client, retries
transient failures with a bounded budget, and turns SDK exceptions into memvm.errors.LLMError
subclasses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memvm.errors import LLMUnavailable
from memvm.llm.types import (
    ChatMessage,
    Completion,
    Endpoint,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from memvm.provider import PLACEHOLDER_API_KEY, MalformedResponse, ProviderCalls, RetryPolicy, Sleep, build_client, same_endpoint

if TYPE_CHECKING:  # the SDK takes about a second to import: provider.py imports it at the first call
    import openai

# ---------------------------------------------------------------- request mapping


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["content"] = message.content or ""  # servers reject null tool results
    return out


def _tool_dict(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _request_body(request: ModelRequest) -> dict[str, Any]:
    """The chat-completions body, already in wire format: the SDK's recursive type transform of its
    parameters costs ~0.3 ms per message on every call (it dominated turn time on long histories)."""
    return {"messages": [_message_dict(m) for m in request.messages], **_request_fields(request)}


def _request_fields(request: ModelRequest) -> dict[str, Any]:
    """Everything of the body but the messages."""
    fields: dict[str, Any] = {"model": request.model}
    if request.tools:
        fields["tools"] = [_tool_dict(t) for t in request.tools]
        if request.tool_choice is not None:
            fields["tool_choice"] = request.tool_choice
    if request.max_tokens is not None:
        fields["max_tokens"] = request.max_tokens
    return fields


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # as the SDK writes a body


# Each message's JSON, kept on the message itself (its own __dict__, as functools.cached_property keeps
# a value; the message is frozen, so its JSON cannot go stale): a turn sends its whole window with every
# model call, and encoding the same few hundred messages again was a tenth of a long turn's CPU. Not a
# WeakKeyDictionary: its lookup hashes and compares every field of the message, each call again.
_KEPT_JSON = "_openai_json"


def _message_json(message: ChatMessage) -> str:
    kept: dict[str, str] = message.__dict__
    encoded = kept.get(_KEPT_JSON)
    if encoded is None:
        encoded = kept[_KEPT_JSON] = _json(_message_dict(message))
    return encoded


def _request_json(request: ModelRequest) -> bytes:
    """The body as the JSON text of `_request_body`, put together from each message's kept JSON."""
    messages = ",".join(map(_message_json, request.messages))
    return f'{{"messages":[{messages}],{_json(_request_fields(request))[1:]}'.encode()


# ---------------------------------------------------------------- response mapping


def _field(obj: Any, name: str) -> Any:
    """A field of a response part: a JSON object (a whole response) or an SDK model (a stream chunk,
    whose undeclared fields, e.g. reasoning_content, are its extras); None if absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def _reasoning(obj: Any) -> str | None:
    value = _field(obj, "reasoning_content") or _field(obj, "reasoning")
    return value if isinstance(value, str) and value else None


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    prompt = _field(raw, "prompt_tokens") or 0
    completion = _field(raw, "completion_tokens") or 0
    total = _field(raw, "total_tokens") or prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for item in raw or ():
        function = _field(item, "function")
        if function is None:  # not a function call (e.g. a "custom" tool); nothing we can run
            continue
        name, arguments = _field(function, "name"), _field(function, "arguments")
        calls.append(ToolCall(id=_field(item, "id") or "", name=name or "", arguments=arguments or ""))
    return tuple(calls)


@contextmanager
def _readable() -> Iterator[None]:
    """A body or stream event that is not JSON: the SDK lets json.loads' error through."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise MalformedResponse(f"not JSON ({exc})") from exc


def _completion(body: Any) -> Completion:
    """A chat completion from its JSON body, checked where the SDK would have built it unchecked."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise MalformedResponse(f"not a chat completion: {str(body)[:200]!r}")
    usage = _usage(body.get("usage"))
    if not choices:
        return Completion(content=None, usage=usage)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse(f"a choice without a message: {str(choice)[:200]!r}")
    content = message.get("content")
    return Completion(
        content=content if isinstance(content, str) else None,
        tool_calls=_tool_calls(message.get("tool_calls")),
        finish_reason=choice.get("finish_reason"),
        usage=usage,
        reasoning=_reasoning(message),
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamAssembler:
    """Folds streamed chunks into one Completion; tool calls are keyed by their index."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None

    def add(self, chunk: Any) -> str | None:
        """Absorb one chunk; return its text piece, if any."""
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        if not chunk.choices:
            return None
        choice = chunk.choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return None
        if piece := _reasoning(delta):
            self.reasoning.append(piece)
        for call_delta in delta.tool_calls or ():
            self._add_call(call_delta)
        piece = delta.content
        if isinstance(piece, str) and piece:
            self.text.append(piece)
            return piece
        return None

    def _add_call(self, call_delta: Any) -> None:
        index = call_delta.index if call_delta.index is not None else self._index_for(call_delta.id)
        call = self.calls.setdefault(index, _PartialCall())
        if call_delta.id:
            call.id = call_delta.id
        function = call_delta.function
        if function is not None:
            if function.name:
                call.name = function.name
            if function.arguments:
                call.arguments.append(function.arguments)

    def _index_for(self, call_id: str | None) -> int:
        """Slot for a delta without an index (some servers omit it): by id, else the latest call."""
        if call_id:
            known = [index for index, call in self.calls.items() if call.id == call_id]
            return known[0] if known else len(self.calls)
        return max(self.calls, default=0)

    def result(self) -> Completion:
        calls = tuple(ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments)) for _, c in sorted(self.calls.items()))
        return Completion(
            content="".join(self.text) if self.text else None,
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            reasoning="".join(self.reasoning) or None,
        )


class OpenAIChatModel:
    """memvm.llm.ports.ChatModel over one openai.AsyncOpenAI client."""

    def __init__(self, client: openai.AsyncOpenAI, *, retry: RetryPolicy = RetryPolicy(), sleep: Sleep = asyncio.sleep) -> None:
        self._client = client
        self._calls = ProviderCalls(client, retry=retry, sleep=sleep)

    @property
    def endpoint(self) -> str:
        return self._calls.endpoint

    async def complete(self, request: ModelRequest) -> Completion:
        body = _request_json(request)

        async def call() -> Completion:
            # Still the SDK's request (auth, headers, timeout, its errors), but the body goes as JSON
            # already written and the answer comes back as bytes: the SDK's transform of the parameters
            # and its build of a pydantic ChatCompletion were a third of its CPU per call (issue 30).
            raw = await self._client.post("/chat/completions", cast_to=bytes, content=body)
            with _readable():
                return _completion(json.loads(raw))

        return await self._calls.run(request.model, call)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | Completion]:
        # create() builds the SDK's stream; the wire body rides in extra_body, past its type transform.
        kwargs: dict[str, Any] = {"model": request.model, "messages": [], "extra_body": _request_body(request)}
        kwargs.update(stream=True, stream_options={"include_usage": True})

        async def open_stream() -> tuple[Any, Any]:
            # Retry covers only the time until the first chunk: after that, deltas have been
            # handed out and a retry would repeat them.
            stream = await self._client.chat.completions.create(**kwargs)
            try:
                with _readable():
                    return stream, await anext(stream)
            except StopAsyncIteration:
                return stream, None
            except BaseException:
                await stream.close()
                raise

        stream, first = await self._calls.run(request.model, open_stream)
        import openai  # loaded by now (the client exists); see provider.py

        assembler = _StreamAssembler()
        try:
            with _readable():
                if first is not None:
                    if piece := assembler.add(first):
                        yield TextDelta(piece)
                    async for chunk in stream:
                        if piece := assembler.add(chunk):
                            yield TextDelta(piece)
        except (openai.APIError, MalformedResponse) as exc:
            raise self._calls.error(request.model, exc, attempts=1, mid_stream=True) from exc
        finally:
            await stream.close()
        yield assembler.result()


class ChatModelFactory:
    """Builds and caches one AsyncOpenAI client per (base_url, api_key); closes them all in aclose()."""

    def __init__(
        self,
        *,
        default_base_url: str | None,
        default_api_key: str | None,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._default_base_url = default_base_url
        self._default_api_key = default_api_key
        self._retry = retry
        self._sleep = sleep
        self._clients: dict[tuple[str | None, str], openai.AsyncOpenAI] = {}

    def for_endpoint(self, endpoint: Endpoint) -> OpenAIChatModel:
        base_url = endpoint.base_url or self._default_base_url
        # The server's key goes to the server's endpoint only: an agent's llm_config may name any URL.
        server_key = self._default_api_key if same_endpoint(base_url, self._default_base_url) else None
        api_key = endpoint.api_key or server_key or PLACEHOLDER_API_KEY
        key = (base_url, api_key)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = build_client(base_url, api_key, self._retry)
        return OpenAIChatModel(client, retry=self._retry, sleep=self._sleep)

    async def provider_models(self, timeout: float) -> list[str]:
        """The model ids the configured endpoint lists (its /v1/models); raises LLMError if it cannot."""
        self.for_endpoint(Endpoint(base_url=None))  # builds the default client if no turn has yet
        client = self._clients[(self._default_base_url, self._default_api_key or PLACEHOLDER_API_KEY)]
        import openai  # loaded by now (the client exists); see provider.py

        try:
            page = await client.with_options(timeout=timeout, max_retries=0).models.list()
        except openai.OpenAIError as error:
            raise LLMUnavailable(f"listing the provider's models failed: {error}") from None
        return [model.id for model in page.data]

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

"""ChatModel over any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp, …).

The only module in memvm that imports `openai`: it maps memvm.llm.types to the wire format and
back, retries transient failures with a bounded budget, and turns SDK exceptions into
memvm.errors.LLMError subclasses.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from memvm.errors import ContextWindowExceeded, LLMError, LLMRejected, LLMTimeout, LLMUnavailable
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

Sleep = Callable[[float], Awaitable[Any]]

# Local servers accept any key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"

# How providers say "prompt too long": OpenAI's code, OpenAI/vLLM's message, llama.cpp's message.
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "exceeds the available context size")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # total tries for retryable failures
    base_delay: float = 0.5  # exponential backoff with full jitter, capped
    max_delay: float = 8.0
    timeout: float = 60.0  # per-request timeout (seconds)

    def backoff(self, failures: int) -> float:
        """Delay before the next try after `failures` failed tries (full jitter)."""
        return random.uniform(0.0, min(self.max_delay, self.base_delay * 2 ** (failures - 1)))


# ---------------------------------------------------------------- request mapping


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
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


def _request_kwargs(request: ModelRequest) -> dict[str, Any]:
    # Messages and tools are already wire-format dicts: passing them through `extra_body` skips the
    # SDK's recursive type transform, which costs ~0.3 ms per message on every call (it dominated
    # turn time on long histories). `messages=[]` only satisfies the signature; extra_body wins.
    body: dict[str, Any] = {"messages": [_message_dict(m) for m in request.messages]}
    kwargs: dict[str, Any] = {"model": request.model, "messages": [], "extra_body": body}
    if request.tools:
        body["tools"] = [_tool_dict(t) for t in request.tools]
        if request.tool_choice is not None:
            kwargs["tool_choice"] = request.tool_choice
    if request.max_tokens is not None:
        kwargs["max_tokens"] = request.max_tokens
    return kwargs


# ---------------------------------------------------------------- response mapping


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK may not declare (e.g. reasoning_content); None if absent."""
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def _reasoning(obj: Any) -> str | None:
    value = _extra(obj, "reasoning_content") or _extra(obj, "reasoning")
    return value if isinstance(value, str) and value else None


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    prompt = getattr(raw, "prompt_tokens", None) or 0
    completion = getattr(raw, "completion_tokens", None) or 0
    total = getattr(raw, "total_tokens", None) or prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for item in raw or ():
        function = getattr(item, "function", None)
        if function is None:  # not a function call (e.g. a "custom" tool); nothing we can run
            continue
        calls.append(ToolCall(id=item.id or "", name=function.name or "", arguments=function.arguments or ""))
    return tuple(calls)


def _completion(response: Any) -> Completion:
    if not response.choices:
        return Completion(content=None, usage=_usage(getattr(response, "usage", None)))
    choice = response.choices[0]
    message = choice.message
    return Completion(
        content=message.content,
        tool_calls=_tool_calls(message.tool_calls),
        finish_reason=choice.finish_reason,
        usage=_usage(getattr(response, "usage", None)),
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
        if delta.content:
            self.text.append(delta.content)
            return delta.content
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
        calls = tuple(
            ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments))
            for _, c in sorted(self.calls.items())
        )
        return Completion(
            content="".join(self.text) if self.text else None,
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            reasoning="".join(self.reasoning) or None,
        )


# ---------------------------------------------------------------- errors


def _provider_message(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return exc.message


def _is_context_overflow(exc: openai.APIStatusError) -> bool:
    text = f"{exc.code or ''} {_provider_message(exc)}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _retryable(exc: Exception) -> bool:
    # InternalServerError is every 5xx; APITimeoutError is an APIConnectionError.
    return isinstance(exc, (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError))


def _seconds(text: str | None, scale: float = 1.0) -> float | None:
    try:
        value = float(text) * scale  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return max(0.0, value) if math.isfinite(value) else None


def _retry_after(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, Retry-After seconds or date), if it said."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    if (ms := _seconds(headers.get("retry-after-ms"), 0.001)) is not None:
        return ms
    value = headers.get("retry-after")
    if value is None:
        return None
    if (seconds := _seconds(value)) is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# ---------------------------------------------------------------- the model


class ProviderCalls:
    """Calls to one OpenAI-compatible server: shared by the chat model and the embedder."""

    def __init__(self, client: openai.AsyncOpenAI, *, retry: RetryPolicy = RetryPolicy(), sleep: Sleep = asyncio.sleep) -> None:
        self._client = client
        self._retry = retry
        self._sleep = sleep

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def run(self, model: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call()` with bounded retries of timeouts, connection errors, 5xx and 429; SDK errors
        come out as LLMError subclasses that name the model and endpoint."""
        policy = self._retry
        attempts = max(1, policy.attempts)
        for attempt in range(1, attempts + 1):
            try:
                return await call()
            except openai.APIError as exc:
                if not _retryable(exc) or attempt == attempts:
                    raise self.error(model, exc, attempts=attempt) from exc
                await self._sleep(self._delay(exc, attempt))
        raise AssertionError("unreachable")

    def _delay(self, exc: Exception, failures: int) -> float:
        asked = _retry_after(exc)
        if asked is not None:
            return min(asked, self._retry.max_delay)
        return self._retry.backoff(failures)

    def error(self, model: str, exc: openai.APIError, *, attempts: int, mid_stream: bool = False) -> LLMError:
        where = f"model {model!r} at {self.endpoint}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        during = " while streaming the response" if mid_stream else ""
        detail = _provider_message(exc)
        if isinstance(exc, openai.APITimeoutError):
            return LLMTimeout(f"LLM request to {where} timed out{during}{tries} (timeout {self._retry.timeout:g}s)")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if _is_context_overflow(exc):
                return ContextWindowExceeded(f"The prompt is too long for {where}: {detail}")
            if _retryable(exc):
                return LLMUnavailable(f"LLM {where} is unavailable (HTTP {status}){tries}: {detail}")
            return LLMRejected(f"LLM {where} rejected the request (HTTP {status}): {detail}")
        if isinstance(exc, openai.APIConnectionError):
            reason = f"{detail} ({exc.__cause__})" if exc.__cause__ else detail
            if mid_stream:
                return LLMUnavailable(f"Lost the connection to LLM {where}{during}: {reason}")
            return LLMUnavailable(f"Could not reach LLM {where}{tries}: {reason}")
        # A bare APIError: the server sent an error event inside the stream.
        return LLMUnavailable(f"LLM {where} failed{during}{tries}: {detail}")



class OpenAIChatModel:
    """memvm.llm.ports.ChatModel over one openai.AsyncOpenAI client."""

    def __init__(
        self, client: openai.AsyncOpenAI, *, retry: RetryPolicy = RetryPolicy(), sleep: Sleep = asyncio.sleep
    ) -> None:
        self._client = client
        self._calls = ProviderCalls(client, retry=retry, sleep=sleep)

    @property
    def endpoint(self) -> str:
        return self._calls.endpoint

    async def complete(self, request: ModelRequest) -> Completion:
        kwargs = _request_kwargs(request)

        async def call() -> Completion:
            return _completion(await self._client.chat.completions.create(**kwargs))

        return await self._calls.run(request.model, call)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | Completion]:
        kwargs = _request_kwargs(request)
        kwargs.update(stream=True, stream_options={"include_usage": True})

        async def open_stream() -> tuple[Any, Any]:
            # Retry covers only the time until the first chunk: after that, deltas have been
            # handed out and a retry would repeat them.
            stream = await self._client.chat.completions.create(**kwargs)
            try:
                return stream, await anext(stream)
            except StopAsyncIteration:
                return stream, None
            except BaseException:
                await stream.close()
                raise

        stream, first = await self._calls.run(request.model, open_stream)
        assembler = _StreamAssembler()
        try:
            if first is not None:
                if piece := assembler.add(first):
                    yield TextDelta(piece)
                async for chunk in stream:
                    if piece := assembler.add(chunk):
                        yield TextDelta(piece)
        except openai.APIError as exc:
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
        api_key = endpoint.api_key or self._default_api_key or PLACEHOLDER_API_KEY
        key = (base_url, api_key)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._build(base_url, api_key)
        return OpenAIChatModel(client, retry=self._retry, sleep=self._sleep)

    def _build(self, base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
        options: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": self._retry.timeout}
        if base_url is not None:  # else the SDK's own default (OPENAI_BASE_URL or api.openai.com)
            options["base_url"] = base_url
        return openai.AsyncOpenAI(**options)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

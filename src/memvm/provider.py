"""Calls to OpenAI-compatible servers, shared by the chat model (llm/) and the embedder
(embeddings/): one way to build the SDK client, one bounded retry loop with jittered backoff, and
one mapping of SDK exceptions to memvm.errors.LLMError subclasses.

The openai SDK takes about a second to import, longer than the rest of a server's start-up: it is
imported by the first client built here (and by main.py in the background once the server is up),
so the functions that need it at run time import it themselves; after the first time that is a
dictionary lookup."""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from memvm.errors import ContextWindowExceeded, LLMError, LLMRejected, LLMTimeout, LLMUnavailable

if TYPE_CHECKING:
    import openai

Sleep = Callable[[float], Awaitable[Any]]
T = TypeVar("T")

# Local servers accept any key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"
_SDK_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def same_endpoint(one: str | None, other: str | None) -> bool:
    """Whether two base URLs name the same server (None: the SDK's default)."""
    return (one or _SDK_DEFAULT_BASE_URL).rstrip("/").lower() == (other or _SDK_DEFAULT_BASE_URL).rstrip("/").lower()


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


def build_client(
    base_url: str | None, api_key: str | None, retry: RetryPolicy, *, http_client: httpx.AsyncClient | None = None
) -> openai.AsyncOpenAI:
    """The SDK's own retries are off (ours apply, see ProviderCalls); its timeout is the policy's."""
    import openai

    options: dict[str, Any] = {"api_key": api_key or PLACEHOLDER_API_KEY, "max_retries": 0, "timeout": retry.timeout}
    if base_url is not None:  # else the SDK's own default (OPENAI_BASE_URL or api.openai.com)
        options["base_url"] = base_url
    if http_client is not None:
        options["http_client"] = http_client
    return openai.AsyncOpenAI(**options)


class MalformedResponse(Exception):
    """The server answered 2xx with something the API does not allow (a body or stream event that is
    not JSON, JSON that is not a chat completion): the provider's failure, treated like a 5xx."""


def _provider_message(exc: openai.APIError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else exc.message


def _is_context_overflow(exc: openai.APIStatusError) -> bool:
    text = f"{exc.code or ''} {_provider_message(exc)}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _retryable(exc: Exception) -> bool:
    import openai

    # InternalServerError is every 5xx; APITimeoutError is an APIConnectionError.
    return isinstance(exc, (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError, MalformedResponse))


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


class ProviderCalls:
    """Calls to one OpenAI-compatible server: shared by the chat model and the embedder."""

    def __init__(self, client: openai.AsyncOpenAI, *, retry: RetryPolicy = RetryPolicy(), sleep: Sleep = asyncio.sleep) -> None:
        self._client = client
        self._retry = retry
        self._sleep = sleep

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def run(self, model: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` with bounded retries of timeouts, connection errors, 5xx and 429; SDK errors
        come out as LLMError subclasses that name the model and endpoint."""
        import openai

        policy = self._retry
        attempts = max(1, policy.attempts)
        for attempt in range(1, attempts + 1):
            try:
                return await call()
            except (openai.APIError, MalformedResponse) as exc:
                if not _retryable(exc) or attempt == attempts:
                    raise self.error(model, exc, attempts=attempt) from exc
                await self._sleep(self._delay(exc, attempt))
        raise AssertionError("unreachable")

    def _delay(self, exc: Exception, failures: int) -> float:
        asked = _retry_after(exc)
        if asked is not None:
            return min(asked, self._retry.max_delay)
        return self._retry.backoff(failures)

    def error(self, model: str, exc: openai.APIError | MalformedResponse, *, attempts: int, mid_stream: bool = False) -> LLMError:
        import openai

        where = f"model {model!r} at {self.endpoint}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        during = " while streaming the response" if mid_stream else ""
        if isinstance(exc, MalformedResponse):
            return LLMUnavailable(f"LLM {where} sent a malformed response{during}{tries}: {exc}")
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

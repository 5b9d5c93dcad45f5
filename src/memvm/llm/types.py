"""Provider-neutral chat types. The agent loop speaks only these; llm/openai_chat.py translates."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
# Letta's provider types that are also model endpoint types; anything else speaks OpenAI's protocol here.
_LETTA_ENDPOINT_TYPES = frozenset({"openai", "ollama", "vllm", "groq", "together", "mistral", "deepseek", "xai", "openrouter"})


def endpoint_type(provider: str) -> str:
    """Letta's `model_endpoint_type` for a handle's provider (Letta clients accept only its own list)."""
    return provider if provider in _LETTA_ENDPOINT_TYPES else "openai"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model produced it; may be malformed


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": which call this answers


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    tool_choice: Literal["auto", "required", "none"] | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Completion:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning: str | None = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of assistant text while a completion streams in."""

    text: str


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach an OpenAI-compatible server."""

    base_url: str | None  # None → the openai SDK default (or OPENAI_BASE_URL)
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

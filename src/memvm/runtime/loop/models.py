"""Which model an agent talks to: endpoint, model name and context window, from its settings."""

import time
from dataclasses import dataclass, field
from typing import Protocol

from memvm.config import Settings
from memvm.errors import InvalidInput
from memvm.llm.ports import ChatModel
from memvm.llm.types import Endpoint
from memvm.orm import Agent, Conversation


class ModelSource(Protocol):
    def for_endpoint(self, endpoint: Endpoint) -> ChatModel: ...

    async def provider_models(self, timeout: float) -> list[str]: ...


CACHE_SECONDS = 60.0


@dataclass
class ProviderModels:
    """The provider's list, remembered for a minute (UIs call models.list() on every page)."""

    fetched_at: float = -CACHE_SECONDS
    names: list[str] = field(default_factory=list)
    failure: str | None = None

    def fresh(self) -> bool:
        return time.monotonic() - self.fetched_at < CACHE_SECONDS


@dataclass(frozen=True)
class AgentModel:
    model: ChatModel
    name: str
    context_window: int


def resolve_model(agent: Agent, source: ModelSource, settings: Settings, conversation: Conversation | None = None) -> AgentModel:
    """A conversation's own `model` and `context_window_limit` win; then llm_config (model,
    model_endpoint, context_window); else the `provider/name` handle on the configured
    OpenAI-compatible endpoint; else the server's default model."""
    config = agent.llm_config or {}
    handle = agent.model or settings.default_model
    name = config.get("model") or (handle.split("/", 1)[1] if handle else None)
    if conversation is not None and conversation.model:
        name = conversation.model.split("/", 1)[1]
    if not name:
        raise InvalidInput(
            f"Agent {agent.id!r} has no model. Set `model` (e.g. 'openai/gpt-4o-mini') or `llm_config` on the agent, "
            "or start the server with MEMVM_DEFAULT_MODEL."
        )
    endpoint = Endpoint(base_url=config.get("model_endpoint"))
    window = (conversation.context_window_limit if conversation else None) or context_window_of(agent, settings)
    return AgentModel(model=source.for_endpoint(endpoint), name=name, context_window=window)


def context_window_of(agent: Agent, settings: Settings) -> int:
    """Tokens the agent's model reads: its own limit, llm_config's, or the server's default."""
    return int(agent.context_window_limit or (agent.llm_config or {}).get("context_window") or settings.default_context_window)

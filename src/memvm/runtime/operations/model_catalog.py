"""The models memvm can use, as letta-client's `models.list()` and `models.embeddings.list()` read
them: the configured provider's own list (fetched with a short timeout, cached), the default model,
and the handles agents already use. An unreachable provider costs the list its entries, not its answer."""

import logging
import time
from typing import Any

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.db.uow import transaction
from memvm.embeddings.local import DIM as LOCAL_DIMENSION
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE, KNOWN_DIMS
from memvm.errors import LLMError
from memvm.llm.types import endpoint_type
from memvm.runtime.loop.deps import RuntimeDeps

log = logging.getLogger(__name__)
PROVIDER_TIMEOUT_SECONDS = 3.0


async def chat_models(deps: RuntimeDeps, caller: Caller) -> tuple[list[dict[str, Any]], str | None]:
    """Entries by handle, provider's first; and why the provider's list is missing, if it is."""
    cache = deps.provider_models
    if not cache.fresh():
        try:
            cache.names, cache.failure = await deps.models.provider_models(PROVIDER_TIMEOUT_SECONDS), None
        except LLMError as error:
            log.warning("GET /v1/models/: %s", error.message)
            cache.failure = f"openai-compatible endpoint {deps.settings.openai_base_url or 'api.openai.com'}: {error.message}"
        cache.fetched_at = time.monotonic()
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        used = await agents.model_handles(session)
    handles = (
        [f"openai/{name}" for name in cache.names] + ([deps.settings.default_model] if deps.settings.default_model else []) + used
    )
    return [_chat_entry(handle, deps) for handle in dict.fromkeys(handles)], cache.failure


def _chat_entry(handle: str, deps: RuntimeDeps) -> dict[str, Any]:
    provider, _, name = handle.partition("/")
    kind = endpoint_type(provider)
    window = deps.settings.default_context_window
    return {
        "handle": handle,
        "name": name,
        "model": name,
        "display_name": name,
        "provider_type": kind,
        "provider_name": provider,
        "provider_category": "base",
        "model_endpoint_type": kind,
        "model_endpoint": deps.settings.openai_base_url or "https://api.openai.com/v1",
        "model_type": "llm",
        "context_window": window,
        "max_context_window": window,
    }


def embedding_models(deps: RuntimeDeps) -> list[dict[str, Any]]:
    """The offline local model, and the well-known models of the configured endpoint if there is one."""
    local = DEFAULT_EMBEDDING_HANDLE
    entries = [_embedding_entry(local, "hugging-face", "local", local.split("/", 1)[-1], LOCAL_DIMENSION)]
    if deps.settings.embedding_base_url or deps.settings.openai_api_key or deps.settings.openai_base_url:
        for name, dim in KNOWN_DIMS.items():
            entries.append(_embedding_entry(f"openai/{name}", "openai", "openai", name, deps.settings.embedding_dim or dim))
    return entries


def _embedding_entry(handle: str, kind: str, provider: str, name: str, dim: int) -> dict[str, Any]:
    return {
        "handle": handle,
        "name": name,
        "display_name": name,
        "embedding_model": name,
        "embedding_dim": dim,
        "embedding_endpoint_type": kind,
        "provider_name": provider,
        "provider_type": kind,
    }

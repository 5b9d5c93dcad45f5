"""The models an agent can be given (letta-client's `models.list()` and `models.embeddings.list()`)."""

from typing import Any

from fastapi import Response

from memvm.api.auth import CallerDep
from memvm.api.deps import RuntimeDep
from memvm.api.routers import api_router
from memvm.runtime.operations.model_catalog import chat_models, embedding_models

router = api_router(prefix="/v1/models", tags=["models"])
# Set when the provider's own list could not be fetched: the answer then holds what memvm knows.
PROVIDER_ERRORS_HEADER = "x-memvm-provider-errors"


@router.get("/", response_model=list[dict[str, Any]])
async def list_models(runtime: RuntimeDep, response: Response, caller: CallerDep) -> list[dict[str, Any]]:
    """Chat models: the provider's list (cached for a minute), the default model, and the handles your
    agents use. If the provider cannot be reached, the header x-memvm-provider-errors says so."""
    entries, failure = await chat_models(runtime, caller)
    if failure is not None:
        response.headers[PROVIDER_ERRORS_HEADER] = failure.encode("ascii", "replace").decode()
    return entries


@router.get("/embedding", response_model=list[dict[str, Any]])
async def list_embedding_models(runtime: RuntimeDep) -> list[dict[str, Any]]:
    """Embedding models: the offline local one, and the configured endpoint's well-known ones."""
    return embedding_models(runtime)

"""Embedding handles ("provider/model") → Embedder instances, cached for the process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from memvm.config import Settings
from memvm.embeddings.local import MODEL_ID as LOCAL_MODEL_ID
from memvm.embeddings.local import shared_local_embedder
from memvm.embeddings.model_socket import ModelSocketClient
from memvm.embeddings.openai_embedder import DEFAULT_BATCH_SIZE, OpenAIEmbedder
from memvm.embeddings.ports import CountingEmbedder, Embedder, EmbeddingDimensionMismatch, EmbeddingModel
from memvm.errors import InvalidInput
from memvm.provider import RetryPolicy, Sleep, build_client

if TYPE_CHECKING:  # the SDK takes about a second to import: provider.py imports it at the first call
    import openai

DEFAULT_EMBEDDING_HANDLE = LOCAL_MODEL_ID

# Sizes of well-known models, so the common case needs no MEMVM_EMBEDDING_DIM.
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-ada-002": 1536, "text-embedding-3-large": 3072}


class EmbedderRegistry:
    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Sleep = asyncio.sleep,
        http_client: httpx.AsyncClient | None = None,
        model_socket: Path | None = None,
    ) -> None:
        """`model_socket`: where another process lends the local model (model_socket.py); without
        one, this process loads it."""
        self._base_url = base_url
        self._api_key = api_key
        self._dim = dim
        self._batch_size = batch_size
        self._retry = retry
        self._sleep = sleep
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None
        self._remote: dict[str, OpenAIEmbedder] = {}
        self._lent = ModelSocketClient(model_socket) if model_socket is not None else None

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbedderRegistry:
        """embedding_* settings, falling back to the chat endpoint's URL and key when unset."""
        key = settings.embedding_api_key or settings.openai_api_key
        return cls(
            base_url=settings.embedding_base_url or settings.openai_base_url,
            api_key=key.get_secret_value() if key else None,
            dim=settings.embedding_dim,
            batch_size=settings.embedding_batch_size,
            retry=RetryPolicy(attempts=settings.llm_attempts, timeout=settings.llm_timeout_seconds),
            model_socket=settings.model_socket,
        )

    def local_model(self) -> CountingEmbedder:
        """The local model: lent by another process when this one was given its socket."""
        return self._lent or shared_local_embedder()

    def for_handle(self, handle: str | None) -> Embedder:
        if handle is None or handle.lower() == LOCAL_MODEL_ID.lower():
            return self.local_model()
        provider, _, model = handle.partition("/")
        if not provider or not model:
            raise InvalidInput(
                f"Invalid embedding handle {handle!r}: expected 'provider/model', "
                f"e.g. {DEFAULT_EMBEDDING_HANDLE!r} or 'openai/text-embedding-3-small'"
            )
        if provider.lower() == "local":
            raise InvalidInput(f"Unknown local embedding model {handle!r}; the only one is {DEFAULT_EMBEDDING_HANDLE!r}")
        embedder = self._remote.get(handle)
        if embedder is None:
            embedder = self._remote[handle] = self._build(handle, model)
        return embedder

    def for_model(self, model: EmbeddingModel) -> Embedder:
        """The embedder that made vectors of `model`, so a query embedded by it can be compared with them."""
        embedder = self.for_handle(model.model)
        if embedder.dim != model.dim:
            raise EmbeddingDimensionMismatch(
                f"Vectors of {model.model!r} stored here have {model.dim} dimensions but this server embeds with "
                f"{embedder.dim} (MEMVM_EMBEDDING_DIM); they cannot be compared with the query."
            )
        return embedder

    def _build(self, handle: str, model: str) -> OpenAIEmbedder:
        dim = self._dim or KNOWN_DIMS.get(model)
        if dim is None:
            raise InvalidInput(
                f"The dimension of embedding model {handle!r} is not known; set MEMVM_EMBEDDING_DIM to its vector size"
            )
        return OpenAIEmbedder(
            self._openai_client(),
            model,
            dim,
            self._batch_size,
            handle=handle,
            send_dimensions=self._dim is not None,
            retry=self._retry,
            sleep=self._sleep,
        )

    def _openai_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = build_client(self._base_url, self._api_key, self._retry, http_client=self._http_client)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client; the shared local model stays loaded for the process."""
        client, self._client = self._client, None
        self._remote.clear()
        if client is not None:
            await client.close()

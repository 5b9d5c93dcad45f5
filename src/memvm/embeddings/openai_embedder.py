"""Embedder over any OpenAI-compatible /v1/embeddings endpoint (OpenAI, Ollama, vLLM, TEI, …)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memvm.embeddings.ports import EmbeddingDimensionMismatch
from memvm.errors import LLMError, LLMRejected
from memvm.provider import MalformedResponse, ProviderCalls, RetryPolicy, Sleep

if TYPE_CHECKING:  # the SDK takes about a second to import: provider.py imports it at the first call
    import openai

DEFAULT_BATCH_SIZE = 64
_REFUSED_ENCODING = {400, 422}  # how a server that knows only floats refuses encoding_format=base64


class OpenAIEmbedder:
    """memvm.embeddings.ports.Embedder over one openai.AsyncOpenAI client (built with max_retries=0:
    retries are ours, with the same bounded policy and error mapping as chat)."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        dim: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        handle: str | None = None,
        send_dimensions: bool = False,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self._client = client
        self._wire_model = model  # what the server calls it
        self.model = handle or model  # what we store with each vector
        self.dim = dim
        self._batch_size = max(1, batch_size)
        self._send_dimensions = send_dimensions  # only when configured: ada-002 and most servers refuse it
        # The same retry loop and SDK-error → LLMError mapping as the chat model.
        self._calls = ProviderCalls(client, retry=retry, sleep=sleep)
        # base64, as the official SDK asks by default: a vector's 4 bytes per float, where the JSON of
        # 1,536 floats takes 0.5 ms to parse. A server that ignores it and answers floats is read too.
        self._encoding = "base64"

    @property
    def endpoint(self) -> str:
        return self._calls.endpoint

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):  # a str is a Sequence[str]: one vector per character is never meant
            raise TypeError("embed() takes a sequence of texts, not one str")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors += await self._embed_batch(list(texts[start : start + self._batch_size]))
        return vectors

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        try:
            response = await self._answer(texts)
        except LLMError as exc:
            raise type(exc)(f"Embedding request failed: {exc.message}") from exc
        return self._vectors(response, len(texts))

    async def _answer(self, texts: list[str]) -> Any:
        """The server's answer, in base64 unless it refuses base64 (some proxies and older servers
        know only floats): then in floats, and from then on once floats were taken."""
        try:
            return await self._request(texts, self._encoding)
        except LLMRejected as exc:
            if self._encoding == "float" or _status(exc) not in _REFUSED_ENCODING:
                raise
        response = await self._request(texts, "float")
        self._encoding = "float"
        return response

    async def _request(self, texts: list[str], encoding: str) -> Any:
        kwargs: dict[str, Any] = {"model": self._wire_model, "input": texts, "encoding_format": encoding}
        if self._send_dimensions:
            kwargs["dimensions"] = self.dim

        async def call() -> Any:
            # The raw JSON: the SDK's typed parse of a response costs about 10 µs per number (15 ms
            # for one 1536-d vector), far more than the request itself.
            raw = await self._client.embeddings.with_raw_response.create(**kwargs)
            try:
                return raw.http_response.json()
            except ValueError as exc:
                raise MalformedResponse(f"not JSON ({exc})") from exc

        return await self._calls.run(self._wire_model, call)

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        where = f"embedding model {self._wire_model!r} at {self.endpoint}"
        try:
            data = sorted(response["data"], key=lambda item: item["index"])  # servers may reorder
            rows = [_floats(item["embedding"]) for item in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise LLMRejected(f"The {where} answered with something that is not an embedding list ({exc!r})") from None
        if len(rows) != expected:
            raise LLMRejected(f"The {where} returned {len(rows)} vectors for {expected} inputs")
        import numpy as np  # not at start-up: see local.py

        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            matrix = np.asarray([], dtype=np.float64)  # ragged or not numbers: reported below
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise EmbeddingDimensionMismatch(
                f"The {where} returned {got}-dimensional vectors but {self.dim} are configured; "
                f"set the embedding dimension (MEMVM_EMBEDDING_DIM) to the model's size."
            )
        if not np.isfinite(matrix).all():  # PostgreSQL would refuse the batch's write
            raise LLMRejected(f"The {where} returned a vector with NaN or infinite numbers")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        vectors: list[list[float]] = (matrix / np.maximum(norms, 1e-12)).tolist()
        return vectors


def _floats(embedding: Any) -> Any:
    """One vector of the response: float32s in base64 (little-endian, as OpenAI sends them), or a
    list of numbers from a server that answers floats whatever was asked. ValueError if neither."""
    if not isinstance(embedding, str):
        return embedding
    import numpy as np

    packed = base64.b64decode(embedding, validate=True)  # binascii.Error is a ValueError
    if len(packed) % 4:
        raise ValueError(f"{len(packed)} bytes of base64 are no whole number of float32s")
    return np.frombuffer(packed, dtype="<f4")


def _status(error: LLMError) -> int | None:
    """The HTTP status of the provider's answer behind `error`, if it answered one."""
    return getattr(error.__cause__, "status_code", None)

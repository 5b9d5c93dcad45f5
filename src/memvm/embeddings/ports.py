"""What memory search needs of an embedding model. Implementations: local.py (offline default),
openai_embedder.py (any OpenAI-compatible /v1/embeddings endpoint)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memvm.errors import LLMError


class Embedder(Protocol):
    # Stored with every vector: vectors of two different models (or dims) are never compared.
    model: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector of `dim` floats per text, in order; [] for no texts."""


class CountingEmbedder(Embedder, Protocol):
    """The local model, in this process or lent by another (model_socket.py)."""

    async def embed_counting(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """embed's vectors, and how many tokens the model read (what POST /v1/embeddings reports)."""


@dataclass(frozen=True)
class EmbeddingModel:
    """Which model a set of vectors comes from: an archive's, an agent's, or a passage's."""

    model: str
    dim: int

    @classmethod
    def of(cls, embedder: Embedder) -> "EmbeddingModel":
        return cls(embedder.model, embedder.dim)

    def letta_config(self, chunk_size: int) -> dict[str, Any]:
        """Letta's `embedding_config` for vectors of this model (`model` is a `provider/name` handle)."""
        provider, name = self.model.split("/", 1)
        return {
            "embedding_model": name,
            "embedding_dim": self.dim,
            "embedding_endpoint_type": provider,
            "handle": self.model,
            "embedding_chunk_size": chunk_size,
        }


class EmbeddingModelError(RuntimeError):
    """The local model files are missing or are not the files we checked (an install problem)."""


class EmbeddingDimensionMismatch(LLMError):
    """The embedding endpoint returned vectors of another size than configured."""


class EmbeddingFailed(LLMError):
    """The process that holds the local model (`memvm serve`'s worker) could not embed the texts."""

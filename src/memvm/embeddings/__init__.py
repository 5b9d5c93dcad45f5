"""Text → vectors for memory search: an offline local model by default, or an OpenAI-compatible endpoint."""

from memvm.embeddings.local import LocalMiniLM, shared_local_embedder
from memvm.embeddings.openai_embedder import OpenAIEmbedder
from memvm.embeddings.ports import Embedder, EmbeddingDimensionMismatch, EmbeddingModelError
from memvm.embeddings.registry import DEFAULT_EMBEDDING_HANDLE, EmbedderRegistry

__all__ = [
    "DEFAULT_EMBEDDING_HANDLE",
    "Embedder",
    "EmbedderRegistry",
    "EmbeddingDimensionMismatch",
    "EmbeddingModelError",
    "LocalMiniLM",
    "OpenAIEmbedder",
    "shared_local_embedder",
]

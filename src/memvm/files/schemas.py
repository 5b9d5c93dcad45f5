"""Folder shapes of the Letta v1 API (letta-client's Folder, FolderListResponse, AgentState.sources)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memvm.embeddings.ports import EmbeddingModel

# Letta's default (constants.DEFAULT_EMBEDDING_CHUNK_SIZE); stored with the folder for its files' chunking.
DEFAULT_CHUNK_SIZE = 300
_HANDLE = r"^[^/\s]+/\S+$"


class EmbeddingConfigIn(BaseModel):
    """The part of Letta's embedding_config that names a model; the rest is derived from the model."""

    model_config = ConfigDict(extra="ignore")

    handle: str | None = Field(None, pattern=_HANDLE)
    embedding_endpoint_type: str | None = None
    embedding_model: str | None = None
    embedding_chunk_size: int | None = Field(None, ge=1, le=100_000)

    def model_handle(self) -> str | None:
        if self.handle is not None:
            return self.handle
        if self.embedding_endpoint_type and self.embedding_model:
            return f"{self.embedding_endpoint_type}/{self.embedding_model}"
        return None


class FolderCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding: str | None = Field(None, pattern=_HANDLE, description="Embedding handle; default: the server's.")
    embedding_chunk_size: int | None = Field(None, ge=1, le=100_000)
    embedding_config: EmbeddingConfigIn | None = Field(None, description="Used when `embedding` is not given.")

    def embedding_handle(self) -> str | None:
        """The model the folder's chunks will be embedded with (None: the server's default)."""
        if self.embedding is not None or self.embedding_config is None:
            return self.embedding
        return self.embedding_config.model_handle()

    def chunk_size(self) -> int:
        from_config = self.embedding_config.embedding_chunk_size if self.embedding_config else None
        return self.embedding_chunk_size or from_config or DEFAULT_CHUNK_SIZE


class FolderUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None
    instructions: str | None = None
    metadata: dict[str, Any] | None = None
    embedding_config: EmbeddingConfigIn | None = Field(
        None, description="Fixed at creation: accepted only if it names the folder's own model."
    )


class FolderRead(BaseModel):
    id: str
    name: str
    description: str | None
    instructions: str | None
    metadata: dict[str, Any]
    embedding_config: dict[str, Any]
    vector_db_provider: Literal["native"] = "native"
    created_by_id: str | None = None
    last_updated_by_id: str | None = None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, folder: Any) -> "FolderRead":
        model = EmbeddingModel(folder.embedding_model, folder.embedding_dim)
        return cls(
            id=folder.id,
            name=folder.name,
            description=folder.description,
            instructions=folder.instructions,
            metadata=folder.metadata_,
            embedding_config=model.letta_config(folder.chunk_size),
            created_at=folder.created_at,
            updated_at=folder.updated_at,
        )

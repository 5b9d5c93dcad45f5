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


DuplicateHandling = Literal["skip", "error", "suffix", "replace"]
ProcessingStatus = Literal["pending", "parsing", "embedding", "completed", "error"]


class FileRead(BaseModel):
    """A folder's file (letta-client's FileUploadResponse / FileListResponse / FileRetrieveResponse).
    `content`, the parsed text, only when asked for: it can be megabytes."""

    id: str
    source_id: str
    file_name: str
    original_file_name: str
    file_path: str | None = None
    file_type: str
    file_size: int
    processing_status: ProcessingStatus
    error_message: str | None
    total_chunks: int | None
    chunks_embedded: int | None
    content: str | None = None
    file_creation_date: str | None = None
    file_last_modified_date: str | None = None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, file: Any, *, content: str | None = None, qualified: bool = True) -> "FileRead":
        """As Letta answers: uploads name the file as agents do ("<folder>/<name>"); listings and
        lookups drop the folder part."""
        return cls(
            id=file.id,
            source_id=file.folder_id,
            file_name=file.file_name if qualified else file.file_name.split("/", 1)[-1],
            original_file_name=file.original_file_name,
            file_type=file.file_type,
            file_size=file.file_size,
            processing_status=file.processing_status,
            error_message=file.error_message,
            total_chunks=file.total_chunks,
            chunks_embedded=file.chunks_embedded,
            content=content,
            created_at=file.created_at,
            updated_at=file.updated_at,
        )


class AgentFileRead(BaseModel):
    """One of an agent's files as it sees it (letta-client's agents FileListResponse). `id` is the
    view's own id, the listing's cursor; the lines are the file's, 1-based, when it is open."""

    id: str
    file_id: str
    file_name: str
    folder_id: str
    folder_name: str
    is_open: bool
    start_line: int | None
    end_line: int | None
    last_accessed_at: datetime
    visible_content: str | None


class FileBlockRead(BaseModel):
    """An attached file in AgentState.memory.file_blocks (letta-client's MemoryFileBlock): `value` is
    the view the prompt shows, empty while the file is closed."""

    file_id: str
    source_id: str
    is_open: bool
    value: str
    label: str
    limit: int
    read_only: bool = True
    last_accessed_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)

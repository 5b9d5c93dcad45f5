"""Archive and passage shapes of the Letta v1 API."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memvm.embeddings.ports import EmbeddingModel

# Longer texts are refused rather than silently truncated by the embedding model: split them.
MAX_PASSAGE_CHARS = 10_000


class ArchiveCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    embedding: str | None = Field(None, pattern=r"^[^/\s]+/\S+$", description="Embedding handle; default: the server's.")
    embedding_config: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ArchiveUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None


class PassageCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_PASSAGE_CHARS, description=f"At most {MAX_PASSAGE_CHARS} characters.")
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None


@dataclass(frozen=True)
class StoredPassage:
    """A passage as an insert stored it (the columns PassageRead shows; never the vector)."""

    id: str
    archive_id: str
    text: str
    tags: list[str]
    metadata_: dict[str, Any]
    embedding_model: str
    embedding_dim: int
    writer_id: str | None
    created_at: datetime


class PassageBatchCreate(BaseModel):
    passages: list[PassageCreate] = Field(min_length=1, max_length=1000)


class SearchFilters(BaseModel):
    query: str
    tags: list[str] = Field(default_factory=list)
    tag_match_mode: Literal["any", "all"] = "any"
    top_k: int = Field(5, ge=1, le=100)
    start_datetime: str | None = None
    end_datetime: str | None = None


def embedding_config(model: str, dim: int) -> dict[str, Any]:
    return EmbeddingModel(model, dim).letta_config(MAX_PASSAGE_CHARS)


class ArchiveRead(BaseModel):
    id: str
    name: str
    description: str | None
    vector_db_provider: str = "native"
    embedding_config: dict[str, Any]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, archive: Any) -> "ArchiveRead":
        return cls(
            id=archive.id,
            name=archive.name,
            description=archive.description,
            embedding_config=embedding_config(archive.embedding_model, archive.embedding_dim),
            metadata=archive.metadata_,
            created_at=archive.created_at,
            updated_at=archive.updated_at,
        )


class PassageRead(BaseModel):
    id: str
    text: str
    archive_id: str
    tags: list[str]
    metadata: dict[str, Any]
    embedding: list[float] | None = Field(None, description="Not returned (vectors are large); always null.")
    embedding_config: dict[str, Any]
    created_at: datetime
    created_by_id: str | None
    is_deleted: bool = False

    @classmethod
    def of(cls, passage: Any) -> "PassageRead":
        return cls(
            id=passage.id,
            text=passage.text,
            archive_id=passage.archive_id,
            tags=passage.tags,
            metadata=passage.metadata_,
            embedding_config=embedding_config(passage.embedding_model, passage.embedding_dim),
            created_at=passage.created_at,
            created_by_id=passage.writer_id,
        )

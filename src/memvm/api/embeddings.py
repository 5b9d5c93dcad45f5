"""POST /v1/embeddings in OpenAI's shape, from memvm's offline model: another server (Letta among
them) or a script can embed with exactly the vectors memvm stores, with no model of its own. Only the
local model is served: the server's keys for remote providers are not lent out through it."""

import base64
import struct
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvm.api.deps import RuntimeDep
from memvm.api.routers import api_router
from memvm.embeddings.local import DIM, MODEL_ID
from memvm.errors import InvalidInput

router = api_router(tags=["embeddings"])
MAX_INPUTS = 2048  # OpenAI's own limit per request
MAX_INPUT_CHARS = 100_000  # the model reads the first 256 tokens; more is only work to tokenize
# The model's handle, and its bare name (what Letta's embedding_config names as embedding_model).
SERVED = {MODEL_ID.lower(), MODEL_ID.split("/", 1)[1].lower()}

Text = Annotated[str, Field(min_length=1, max_length=MAX_INPUT_CHARS)]


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # OpenAI's `user` and what other clients add

    input: Text | list[Text] = Field(description=f"A text, or up to {MAX_INPUTS} texts (token arrays are not taken).")
    model: str = Field(MODEL_ID, description=f"{MODEL_ID} (or its bare name); the only model served.")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, description=f"Must be {DIM} if given: the model's size.")

    @field_validator("input")
    @classmethod
    def _not_too_many(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_INPUTS:
            raise ValueError(f"input holds {len(value)} texts; send 1 to {MAX_INPUTS}")
        return value


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str  # str: base64 of little-endian float32


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage


@router.post("/v1/embeddings", response_model=EmbeddingsResponse)
async def create_embeddings(body: EmbeddingsRequest, runtime: RuntimeDep) -> EmbeddingsResponse:
    """OpenAI-compatible embeddings from memvm's local model (all-MiniLM-L6-v2, 384-d, unit vectors).
    `usage` counts the tokens the model read (it truncates a text at 256)."""
    if body.model.lower() not in SERVED:
        raise InvalidInput(f"Model {body.model!r} is not served here; the only one is {MODEL_ID!r}.")
    if body.dimensions is not None and body.dimensions != DIM:
        raise InvalidInput(f"{MODEL_ID} makes {DIM}-dimensional vectors; dimensions={body.dimensions} cannot be given.")
    texts = [body.input] if isinstance(body.input, str) else body.input
    vectors, tokens = await runtime.embedders.local_model().embed_counting(texts)
    data = [Embedding(index=index, embedding=_encoded(vector, body.encoding_format)) for index, vector in enumerate(vectors)]
    return EmbeddingsResponse(data=data, model=body.model, usage=Usage(prompt_tokens=tokens, total_tokens=tokens))


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")  # little-endian float32

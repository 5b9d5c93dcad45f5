"""Texts a step's tool calls will search or store, embedded before the step's transaction opens (no
embedding call ever runs inside it). On failure the tools report it themselves."""

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.db.uow import transaction
from memvm.embeddings.ports import Embedder, EmbeddingModel
from memvm.embeddings.registry import EmbedderRegistry
from memvm.errors import InvalidInput, LLMError
from memvm.files import service as files
from memvm.llm.types import ToolCall
from memvm.orm import Agent
from memvm.tools.builtin import EMBEDDED_ARGUMENTS, FOLDER_EMBEDDED_ARGUMENTS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedInputs:
    vectors: dict[str, Sequence[float]] = field(default_factory=dict)  # text → its vector under the agent's model
    # text → its vector under each model of the agent's folders (their chunks' vectors come from those)
    folder_vectors: dict[str, dict[EmbeddingModel, Sequence[float]]] = field(default_factory=dict)


async def embed_tool_inputs(
    embedders: EmbedderRegistry, sessionmaker: async_sessionmaker[AsyncSession], agent: Agent, calls: Sequence[ToolCall]
) -> EmbeddedInputs:
    vectors = await _embedded(embedders.for_handle(agent.embedding), _arguments(calls, EMBEDDED_ARGUMENTS))
    queries = _arguments(calls, FOLDER_EMBEDDED_ARGUMENTS)
    if not queries:
        return EmbeddedInputs(vectors)
    by_model: dict[str, dict[EmbeddingModel, Sequence[float]]] = {query: {} for query in queries}
    for model in await _folder_models(sessionmaker, agent):
        try:
            embedder = embedders.for_model(model)
        except (InvalidInput, LLMError) as failure:
            log.warning("file search of agent %s leaves out folders of %s: %s", agent.id, model.model, failure.message)
            continue
        for query, vector in (await _embedded(embedder, queries)).items():
            by_model[query][model] = vector
    return EmbeddedInputs(vectors, by_model)


async def _folder_models(sessionmaker: async_sessionmaker[AsyncSession], agent: Agent) -> list[EmbeddingModel]:
    async with transaction(sessionmaker, agent.organization_id) as session:
        folders = (await files.folders_of_agents(session, [agent.id]))[agent.id]
    return list(dict.fromkeys(EmbeddingModel(folder.embedding_model, folder.embedding_dim) for folder in folders))


async def _embedded(embedder: Embedder, texts: Sequence[str]) -> dict[str, Sequence[float]]:
    if not texts:
        return {}
    try:
        vectors = await embedder.embed(texts)
    except LLMError as failure:
        log.warning("embedding tool inputs with %s failed: %s", embedder.model, failure.message)
        return {}
    return dict(zip(texts, vectors, strict=True))


def _arguments(calls: Sequence[ToolCall], embedded: Mapping[str, str]) -> list[str]:
    return list(dict.fromkeys(text for call in calls if (text := _embedded_argument(call, embedded))))


def _embedded_argument(call: ToolCall, embedded: Mapping[str, str]) -> str | None:
    name = embedded.get(call.name)
    try:
        value = json.loads(call.arguments or "{}").get(name) if name else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) and value.strip() else None

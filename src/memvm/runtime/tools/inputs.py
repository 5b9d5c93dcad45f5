"""Texts a step's tool calls will search or store, embedded before the step's transaction opens (no
embedding call ever runs inside it). On failure the tools report it themselves."""

import json
import logging
from collections.abc import Sequence

from memvm.embeddings.ports import Embedder
from memvm.errors import LLMError
from memvm.llm.types import ToolCall
from memvm.tools.builtin import EMBEDDED_ARGUMENTS

log = logging.getLogger(__name__)


async def embed_tool_inputs(embedder: Embedder, calls: Sequence[ToolCall]) -> dict[str, Sequence[float]]:
    texts = [text for call in calls if (text := _embedded_argument(call))]
    if not texts:
        return {}
    try:
        vectors = await embedder.embed(texts)
    except LLMError as failure:
        log.warning("embedding tool inputs failed: %s", failure.message)
        return {}
    return dict(zip(texts, vectors, strict=True))


def _embedded_argument(call: ToolCall) -> str | None:
    name = EMBEDDED_ARGUMENTS.get(call.name)
    try:
        value = json.loads(call.arguments or "{}").get(name) if name else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) and value.strip() else None

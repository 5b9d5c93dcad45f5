"""What a tool handler gets: the step's transaction, who is acting, and what was computed before
the transaction opened (embeddings, sandboxed calls: neither ever runs inside it)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.embeddings.ports import EmbeddingModel
from memvm.runtime.tools.outcome import ToolOutcome
from memvm.search.tuning import DEFAULT_TUNING, SearchTuning


@dataclass(frozen=True)
class ToolContext:
    session: AsyncSession
    agent_id: str
    actor: Actor
    conversation_id: str | None = None  # None: the agent's default conversation
    message_id: str | None = None  # the assistant message whose tool calls are running
    run_id: str | None = None  # the running turn
    timezone: str = "UTC"
    embedding: EmbeddingModel | None = None
    vectors: Mapping[str, Sequence[float]] = field(default_factory=dict)  # text → its embedding
    # text → its embedding by each embedding model of the agent's folders (semantic_search_files)
    folder_vectors: Mapping[str, Mapping[EmbeddingModel, Sequence[float]]] = field(default_factory=dict)
    # Outcomes decided before the transaction (sandboxed custom calls, calls the client settled), by call id.
    settled: Mapping[str, ToolOutcome] = field(default_factory=dict)
    search: SearchTuning = DEFAULT_TUNING  # how conversation_search ranks (the server's settings)

    def vector_for(self, text: str) -> Sequence[float] | None:
        return self.vectors.get(text)

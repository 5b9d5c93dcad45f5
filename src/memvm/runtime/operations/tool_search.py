"""Searching the tool catalog over the API: embed the query with the model tools are embedded with
(outside any transaction), then rank in PostgreSQL."""

from collections.abc import Sequence

from memvm import metrics
from memvm.actors import Caller
from memvm.db.uow import transaction
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.search.conversation import QueryVector, SearchMode
from memvm.search.tools import ToolHit, ToolSearch, search_tools


async def find_tools(
    deps: RuntimeDeps,
    caller: Caller,
    *,
    query: str,
    mode: SearchMode,
    tool_types: Sequence[str],
    tags: Sequence[str],
    limit: int,
) -> list[ToolHit]:
    """The caller's organization's tools and the built-ins, best match first."""
    vector = None
    if mode != "fts" and query.strip():
        embedder = deps.embedders.for_handle(None)  # the default model, as the queue embeds tools
        vector = QueryVector(embedder.model, embedder.dim, await deps.query_vectors.vector(embedder, query))
    search = ToolSearch(query=query, vector=vector, mode=mode, tool_types=tool_types, tags=tags, limit=limit)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        with metrics.timed(metrics.SEARCH_SECONDS, "tools"):
            return await search_tools(session, search)

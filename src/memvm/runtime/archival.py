"""Archival operations that need an embedding: the vector is computed before the transaction
opens (one read-only transaction to learn which model applies, then one that writes)."""

from collections.abc import Sequence
from datetime import datetime

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.archives import service as archives
from memvm.archives.schemas import PassageCreate, SearchFilters
from memvm.db.uow import transaction
from memvm.embeddings.ports import Embedder, EmbeddingModel
from memvm.orm import Passage
from memvm.runtime.deps import RuntimeDeps
from memvm.search.archival import PassageHit, PassageSearch, search_passages
from memvm.search.dates import parse_bound


async def _agent_embedder(deps: RuntimeDeps, caller: Caller, agent_id: str) -> Embedder:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id)
    return deps.embedders.for_handle(agent.embedding)


async def insert_for_agent(deps: RuntimeDeps, caller: Caller, agent_id: str, items: Sequence[PassageCreate]) -> list[Passage]:
    """Into the agent's default archive (created on first use)."""
    embedder = await _agent_embedder(deps, caller, agent_id)
    vectors = await embedder.embed([item.text for item in items])
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        model = EmbeddingModel.of(embedder)
        archive = await archives.write_archive(session, agent, model)
        return await archives.insert_passages(
            session, archive, list(zip(items, vectors, strict=True)), model=model, writer=caller.actor
        )


async def insert_into_archive(
    deps: RuntimeDeps, caller: Caller, archive_id: str, items: Sequence[PassageCreate]
) -> list[Passage]:
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        archive = await archives.get_archive(session, archive_id)
    embedder = deps.embedders.for_handle(archive.embedding_model)
    vectors = await embedder.embed([item.text for item in items])
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        archive = await archives.get_archive(session, archive_id)
        return await archives.insert_passages(
            session, archive, list(zip(items, vectors, strict=True)), model=EmbeddingModel.of(embedder), writer=caller.actor
        )


async def search_for_agent(
    deps: RuntimeDeps, caller: Caller, agent_id: str, filters: SearchFilters
) -> tuple[list[PassageHit], str]:
    """Hits across every archive the agent reads, and the agent's timezone for timestamps."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        scope = await archives.search_scope(session, agent_id)
    if scope is None:
        raise agents.agent_not_found(agent_id)
    start = parse_bound(filters.start_datetime, "start_datetime", end=False, timezone=scope.timezone)
    end = parse_bound(filters.end_datetime, "end_datetime", end=True, timezone=scope.timezone)
    if not scope.archive_ids or not filters.query.strip():
        return [], scope.timezone
    embedder = deps.embedders.for_handle(scope.embedding)
    vector = await deps.query_vectors.vector(embedder, filters.query)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        hits = await search_passages(session, _passage_search(filters, scope.archive_ids, embedder, vector, start=start, end=end))
    return hits, scope.timezone


async def attach_for_agent(deps: RuntimeDeps, caller: Caller, agent_id: str, archive_id: str) -> None:
    embedder = await _agent_embedder(deps, caller, agent_id)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        await archives.attach_archive(session, agent, archive_id, EmbeddingModel.of(embedder))


async def search_anywhere(
    deps: RuntimeDeps, caller: Caller, *, query: str | None, agent_id: str | None, archive_id: str | None, filters: SearchFilters
) -> list[PassageHit]:
    """POST /v1/passages/search: one agent's archives (agent_id wins), one archive, or every archive
    of the server's default model. Without a query, the newest matching passages (distance 0)."""
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        if agent_id is not None:
            handle = (await agents.get_agent(session, agent_id)).embedding
            archives_in_scope = await archives.archives_of(session, agent_id)
        elif archive_id is not None:
            archives_in_scope = [await archives.get_archive(session, archive_id)]
            handle = archives_in_scope[0].embedding_model
        else:
            handle, archives_in_scope = None, await archives.all_archives(session)
    embedder = deps.embedders.for_handle(handle)
    in_scope = [a.id for a in archives_in_scope if a.embedding_model.lower() == embedder.model.lower()]
    vector = await deps.query_vectors.vector(embedder, query) if query and query.strip() else None
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        start = parse_bound(filters.start_datetime, "start_date", end=False)
        end = parse_bound(filters.end_datetime, "end_date", end=True)
        return await search_passages(session, _passage_search(filters, in_scope, embedder, vector, start=start, end=end))


def _passage_search(
    filters: SearchFilters,
    archive_ids: Sequence[str],
    embedder: Embedder,
    vector: Sequence[float] | None,
    *,
    start: datetime | None,
    end: datetime | None,
) -> PassageSearch:
    return PassageSearch(
        archive_ids=archive_ids,
        model=embedder.model,
        dim=embedder.dim,
        query_vector=vector,
        top_k=filters.top_k,
        tags=filters.tags,
        match_all_tags=filters.tag_match_mode == "all",
        start=start,
        end=end,
    )

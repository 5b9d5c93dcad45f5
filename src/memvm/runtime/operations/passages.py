"""Archival operations that need an embedding: the vector is computed before the transaction
opens (one read-only unit, without a transaction, to learn which model applies; then one transaction
that writes or searches)."""

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Caller
from memvm.agents import service as agents
from memvm.archives import service as archives
from memvm.archives.schemas import PassageCreate, SearchFilters, StoredPassage
from memvm.db.uow import reading, transaction
from memvm.embeddings.ports import Embedder, EmbeddingModel
from memvm.errors import DomainError, InvalidInput, LLMError
from memvm.orm import Archive
from memvm.runtime.loop.deps import RuntimeDeps
from memvm.search.dates import parse_bound
from memvm.search.passages import MergedHit, PassageHit, PassageSearch, fuse_by_rank, newest_first, search_passages
from memvm.search.tuning import SearchTuning

log = logging.getLogger(__name__)


async def _agent_embedder(deps: RuntimeDeps, caller: Caller, agent_id: str) -> Embedder:
    async with reading(deps.sessionmaker, caller.organization_id) as session:
        handle = await agents.embedding_of(session, agent_id)
    return deps.embedders.for_handle(handle)


async def insert_for_agent(
    deps: RuntimeDeps, caller: Caller, agent_id: str, items: Sequence[PassageCreate]
) -> list[StoredPassage]:
    """Into the agent's default archive (created on first use)."""
    embedder = await _agent_embedder(deps, caller, agent_id)
    vectors = await embedder.embed([item.text for item in items])
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        model = EmbeddingModel.of(embedder)
        archive = await archives.write_archive(session, agent_id, model)
        return await archives.insert_passages(
            session, archive, list(zip(items, vectors, strict=True)), model=model, writer=caller.actor
        )


async def insert_into_archive(
    deps: RuntimeDeps, caller: Caller, archive_id: str, items: Sequence[PassageCreate]
) -> list[StoredPassage]:
    async with reading(deps.sessionmaker, caller.organization_id) as session:
        archive = await archives.get_archive(session, archive_id)
    embedder = deps.embedders.for_handle(archive.embedding_model)
    vectors = await embedder.embed([item.text for item in items])
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        locked = await archives.archive_to_write(session, archive_id)
        return await archives.insert_passages(
            session, locked, list(zip(items, vectors, strict=True)), model=EmbeddingModel.of(embedder), writer=caller.actor
        )


async def search_for_agent(
    deps: RuntimeDeps, caller: Caller, agent_id: str, filters: SearchFilters
) -> tuple[list[PassageHit], str]:
    """Hits across every archive the agent reads, and the agent's timezone for timestamps."""
    async with reading(deps.sessionmaker, caller.organization_id) as session:
        scope = await archives.search_scope(session, agent_id)
    if scope is None:
        raise agents.agent_not_found(agent_id)
    start = parse_bound(filters.start_datetime, "start_datetime", end=False, timezone=scope.timezone)
    end = parse_bound(filters.end_datetime, "end_datetime", end=True, timezone=scope.timezone)
    if not scope.archive_ids or not filters.query.strip():
        return [], scope.timezone
    embedder = deps.embedders.for_handle(scope.embedding)
    vector = await deps.query_vectors.vector(embedder, filters.query)
    search = _passage_search(filters, scope.archive_ids, EmbeddingModel.of(embedder), vector, start=start, end=end)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        hits = await search_passages(session, search, SearchTuning.of(deps.settings))
    return hits, scope.timezone


async def attach_for_agent(deps: RuntimeDeps, caller: Caller, agent_id: str, archive_id: str) -> None:
    embedder = await _agent_embedder(deps, caller, agent_id)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        await archives.attach_archive(session, agent, archive_id, EmbeddingModel.of(embedder))


@dataclass(frozen=True)
class ScopeHits:
    hits: list[MergedHit]
    unsearched: list[str]  # ids of the archives in scope whose embedding model could not embed the query


async def search_anywhere(
    deps: RuntimeDeps, caller: Caller, *, query: str | None, agent_id: str | None, archive_id: str | None, filters: SearchFilters
) -> ScopeHits:
    """POST /v1/passages/search: one agent's archives (agent_id wins), one archive, or every archive of
    the organization, whatever their embedding models. Each model in scope embeds the query once, before
    the transaction opens, and ranks its own archives' passages; the rankings are merged by rank
    (search/passages.py, fuse_by_rank). An archive whose model cannot embed the query is left out,
    logged and named in `unsearched`, unless no model could: then that model's error is raised.
    Without a query, the newest matching passages (distance 0)."""
    start = parse_bound(filters.start_datetime, "start_date", end=False)
    end = parse_bound(filters.end_datetime, "end_date", end=True)
    async with reading(deps.sessionmaker, caller.organization_id) as session:
        archives_by_model = _by_model(await _archives_to_search(session, agent_id, archive_id))
    text = query if query and query.strip() else None
    vectors, unsearched = await _query_vectors(deps, archives_by_model, text) if text else ({}, [])
    searches = [
        _passage_search(filters, archive_ids, model, vectors.get(model), start=start, end=end)
        for model, archive_ids in archives_by_model.items()
        if model in vectors or text is None
    ]
    if not searches:
        return ScopeHits([], unsearched)
    async with transaction(deps.sessionmaker, caller.organization_id) as session:
        tuning = SearchTuning.of(deps.settings)
        rankings = [await search_passages(session, search, tuning) for search in searches]
    merge = newest_first if text is None else fuse_by_rank
    return ScopeHits(merge(rankings, filters.top_k), unsearched)


async def _archives_to_search(session: AsyncSession, agent_id: str | None, archive_id: str | None) -> list[Archive]:
    if agent_id is not None:
        await agents.get_agent(session, agent_id)  # an unknown agent is a 404, not an empty result
        return await archives.archives_of(session, agent_id)
    if archive_id is not None:
        return [await archives.get_archive(session, archive_id)]
    return await archives.all_archives(session)


def _by_model(in_scope: Sequence[Archive]) -> dict[EmbeddingModel, list[str]]:
    by_model: dict[EmbeddingModel, list[str]] = {}
    for archive in in_scope:
        by_model.setdefault(EmbeddingModel(archive.embedding_model, archive.embedding_dim), []).append(archive.id)
    return by_model


async def _query_vectors(
    deps: RuntimeDeps, archives_by_model: dict[EmbeddingModel, list[str]], query: str
) -> tuple[dict[EmbeddingModel, list[float]], list[str]]:
    """The query's vector under each model (concurrently), and the archives of the models that failed."""
    outcomes = await asyncio.gather(*(_query_vector(deps, model, query) for model in archives_by_model))
    vectors = {model: v for model, v in zip(archives_by_model, outcomes, strict=True) if not isinstance(v, DomainError)}
    failures = [(model, e) for model, e in zip(archives_by_model, outcomes, strict=True) if isinstance(e, DomainError)]
    if failures and not vectors:
        raise failures[0][1]
    unsearched: list[str] = []
    for model, error in failures:
        unsearched += archives_by_model[model]
        log.warning("passage search left out archives %s of %s: %s", ", ".join(archives_by_model[model]), model.model, error)
    return vectors, unsearched


async def _query_vector(deps: RuntimeDeps, model: EmbeddingModel, query: str) -> list[float] | DomainError:
    """The query embedded by `model`, or why it cannot be (unknown or unreachable model, another size)."""
    try:
        return await deps.query_vectors.vector(deps.embedders.for_model(model), query)
    except (InvalidInput, LLMError) as error:
        return error


def _passage_search(
    filters: SearchFilters,
    archive_ids: Sequence[str],
    model: EmbeddingModel,
    vector: Sequence[float] | None,
    *,
    start: datetime | None,
    end: datetime | None,
) -> PassageSearch:
    return PassageSearch(
        archive_ids=archive_ids,
        model=model.model,
        dim=model.dim,
        query_vector=vector,
        top_k=filters.top_k,
        tags=filters.tags,
        match_all_tags=filters.tag_match_mode == "all",
        start=start,
        end=end,
        query=filters.query,
    )

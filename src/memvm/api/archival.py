from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from fastapi import Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memvm.agents import service as agents
from memvm.api.auth import CallerDep
from memvm.api.deps import AgentId, RuntimeDep, TransactionDep, page_params
from memvm.api.routers import api_router
from memvm.api.schemas import NULL_ANSWER, AgentPassageHit, AgentPassageSearch, AgentRef, Deleted, PassageSearchResult
from memvm.archives import service
from memvm.archives.schemas import (
    ArchiveCreate,
    ArchiveRead,
    ArchiveUpdate,
    PassageBatchCreate,
    PassageCreate,
    PassageRead,
    SearchFilters,
)
from memvm.db.pagination import PageRequest
from memvm.embeddings.ports import EmbeddingModel
from memvm.ids import id_pattern
from memvm.runtime.operations import passages
from memvm.search.passages import MergedHit

router = api_router(tags=["archival memory"])
ArchiveId = Annotated[str, Path(pattern=id_pattern("archive"), description="archive-<uuid4>")]
PassageId = Annotated[str, Path(pattern=id_pattern("passage"), description="passage-<uuid4>")]


@router.post("/v1/agents/{agent_id}/archival-memory", response_model=list[PassageRead])
async def insert_passage(agent_id: AgentId, body: PassageCreate, runtime: RuntimeDep, caller: CallerDep) -> list[PassageRead]:
    """Store a passage in the agent's archival memory (its default archive, created on first use)."""
    return [PassageRead.of(p) for p in await passages.insert_for_agent(runtime, caller, agent_id, [body])]


@router.get("/v1/agents/{agent_id}/archival-memory", response_model=list[PassageRead])
async def list_passages(
    agent_id: AgentId,
    tx: TransactionDep,
    search: str | None = Query(None, description="Case-insensitive substring of the text."),
    after: str | None = Query(None, description="Passages created after this passage id."),
    before: str | None = Query(None, description="Passages created before this passage id."),
    limit: int = Query(100, ge=1, le=1000),
    ascending: bool = True,
) -> list[PassageRead]:
    """Passages in every archive the agent reads, oldest first by default."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        rows = await service.list_agent_passages(
            session, agent_id, search=search, after=after, before=before, limit=limit, ascending=ascending
        )
    return [PassageRead.of(p) for p in rows]


@router.get("/v1/agents/{agent_id}/archival-memory/search", response_model=AgentPassageSearch)
async def search_agent_passages(
    agent_id: AgentId,
    runtime: RuntimeDep,
    caller: CallerDep,
    query: str,
    tags: Annotated[list[str] | None, Query()] = None,
    tag_match_mode: Literal["any", "all"] = "any",
    top_k: int = Query(5, ge=1, le=100),
    start_datetime: str | None = None,
    end_datetime: str | None = None,
) -> AgentPassageSearch:
    """Nearest passages by meaning; tag and date filters apply before the limit, so top_k is met when enough match."""
    filters = SearchFilters(
        query=query,
        tags=tags or [],
        tag_match_mode=tag_match_mode,
        top_k=top_k,
        start_datetime=start_datetime,
        end_datetime=end_datetime,
    )
    hits, timezone = await passages.search_for_agent(runtime, caller, agent_id, filters)
    results = [
        AgentPassageHit(
            id=h.passage.id,
            content=h.passage.text,
            tags=h.passage.tags,
            relevance=round(h.relevance, 6),
            timestamp=_in_zone(h.passage.created_at, timezone),
        )
        for h in hits
    ]
    return AgentPassageSearch(results=results, count=len(results))


@router.delete("/v1/agents/{agent_id}/archival-memory/{memory_id}", response_model=Deleted)
async def delete_passage(agent_id: AgentId, memory_id: PassageId, tx: TransactionDep) -> Deleted:
    """Delete a passage from one of this agent's archives."""
    async with tx() as session:
        await agents.get_agent(session, agent_id)
        await service.delete_agent_passage(session, agent_id, memory_id)
    return Deleted(message=f"Memory id={memory_id} successfully deleted")


@router.patch("/v1/agents/{agent_id}/archives/attach/{archive_id}", responses=NULL_ANSWER)
async def attach_archive(agent_id: AgentId, archive_id: ArchiveId, runtime: RuntimeDep, caller: CallerDep) -> None:
    """Share an archive with the agent; its embedding model must be the agent's."""
    await passages.attach_for_agent(runtime, caller, agent_id, archive_id)


@router.patch("/v1/agents/{agent_id}/archives/detach/{archive_id}", responses=NULL_ANSWER)
async def detach_archive(agent_id: AgentId, archive_id: ArchiveId, tx: TransactionDep) -> None:
    """Stop the agent reading an archive; the archive and its passages remain."""
    async with tx() as session:
        agent = await agents.get_agent(session, agent_id, lock=True)
        await service.detach_archive(session, agent, archive_id)


class PassageSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str | None = None
    agent_id: str | None = Field(None, pattern=id_pattern("agent"))
    archive_id: str | None = Field(None, pattern=id_pattern("archive"))
    tags: list[str] = Field(default_factory=list)
    tag_match_mode: Literal["any", "all"] = "any"
    limit: int = Field(50, ge=1, le=100)
    start_date: str | None = None
    end_date: str | None = None


UNSEARCHED_HEADER = "x-memvm-unsearched-archives"
_SEARCH_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Hits ordered by `metadata.rrf_score` (see the operation's description).",
        "headers": {
            UNSEARCHED_HEADER: {
                "description": "Comma-separated ids of archives in scope that were not searched because their "
                "embedding model could not embed the query (unknown, unreachable, or of another size); "
                "absent when every archive was searched.",
                "schema": {"type": "string"},
            }
        },
    }
}


@router.post("/v1/passages/search", response_model=list[PassageSearchResult], responses=_SEARCH_ANSWER)
async def search_all_passages(
    body: PassageSearch, runtime: RuntimeDep, response: Response, caller: CallerDep
) -> list[PassageSearchResult]:
    """Search passages of an agent (agent_id), of one archive (archive_id), or of every archive of the
    organization, whatever embedding model each uses: the query is embedded once per model and each
    model ranks its own passages. `score` is the cosine similarity under the passage's own model (1 without
    a query), comparable only between hits of the same `metadata.embedding_model`; the list is ordered by
    `metadata.rrf_score`, the reciprocal-rank fusion of the models' rankings (`metadata.model_rank`).
    Without a query: the newest matching passages. Archives whose model is unavailable are named in the
    `x-memvm-unsearched-archives` header."""
    filters = SearchFilters(
        query=body.query or "",
        tags=body.tags,
        tag_match_mode=body.tag_match_mode,
        top_k=body.limit,
        start_datetime=body.start_date,
        end_datetime=body.end_date,
    )
    found = await passages.search_anywhere(
        runtime, caller, query=body.query, agent_id=body.agent_id, archive_id=body.archive_id, filters=filters
    )
    if found.unsearched:
        response.headers[UNSEARCHED_HEADER] = ", ".join(found.unsearched)
    return [
        PassageSearchResult(passage=PassageRead.of(h.hit.passage), score=round(h.hit.relevance, 6), metadata=_ranking(h))
        for h in found.hits
    ]


def _ranking(merged: MergedHit) -> dict[str, Any]:
    ranking: dict[str, Any] = {"embedding_model": merged.hit.passage.embedding_model}
    if merged.rrf_score is not None:
        ranking |= {"model_rank": merged.model_rank, "rrf_score": round(merged.rrf_score, 6)}
    return ranking


@router.post("/v1/archives/", response_model=ArchiveRead)
async def create_archive(body: ArchiveCreate, runtime: RuntimeDep, tx: TransactionDep) -> ArchiveRead:
    """Create an archive; its embedding model is fixed from now on."""
    embedder = runtime.embedders.for_handle(body.embedding)
    async with tx() as session:
        return ArchiveRead.of(await service.create_archive(session, body, EmbeddingModel.of(embedder)))


@router.get("/v1/archives/", response_model=list[ArchiveRead])
async def list_archives(
    tx: TransactionDep,
    page: Annotated[PageRequest, Depends(page_params(50, "desc"))],
    name: str | None = None,
    agent_id: str | None = None,
) -> list[ArchiveRead]:
    """Archives, newest first; filter by name or by an agent that reads them."""
    async with tx() as session:
        return [ArchiveRead.of(a) for a in await service.list_archives(session, page, name=name, agent_id=agent_id)]


@router.get("/v1/archives/{archive_id}", response_model=ArchiveRead)
async def retrieve_archive(archive_id: ArchiveId, tx: TransactionDep) -> ArchiveRead:
    """One archive."""
    async with tx() as session:
        return ArchiveRead.of(await service.get_archive(session, archive_id))


@router.patch("/v1/archives/{archive_id}", response_model=ArchiveRead)
async def update_archive(archive_id: ArchiveId, body: ArchiveUpdate, tx: TransactionDep) -> ArchiveRead:
    """Rename or redescribe an archive."""
    async with tx() as session:
        return ArchiveRead.of(await service.update_archive(session, archive_id, body))


@router.delete("/v1/archives/{archive_id}", status_code=204)
async def delete_archive(archive_id: ArchiveId, tx: TransactionDep) -> Response:
    """Delete an archive and all its passages."""
    async with tx() as session:
        await service.delete_archive(session, archive_id)
    return Response(status_code=204)


@router.get("/v1/archives/{archive_id}/agents", response_model=list[AgentRef])
async def list_archive_agents(archive_id: ArchiveId, tx: TransactionDep) -> list[AgentRef]:
    """Ids of the agents that read this archive."""
    async with tx() as session:
        return [AgentRef(id=agent_id) for agent_id in await service.agents_of_archive(session, archive_id)]


@router.post("/v1/archives/{archive_id}/passages", response_model=PassageRead)
async def create_archive_passage(
    archive_id: ArchiveId, body: PassageCreate, runtime: RuntimeDep, caller: CallerDep
) -> PassageRead:
    """Add one passage to an archive."""
    [passage] = await passages.insert_into_archive(runtime, caller, archive_id, [body])
    return PassageRead.of(passage)


@router.post("/v1/archives/{archive_id}/passages/batch", response_model=list[PassageRead])
async def create_archive_passages(
    archive_id: ArchiveId, body: PassageBatchCreate, runtime: RuntimeDep, caller: CallerDep
) -> list[PassageRead]:
    """Add up to 1000 passages to an archive in one transaction."""
    return [PassageRead.of(p) for p in await passages.insert_into_archive(runtime, caller, archive_id, body.passages)]


@router.delete("/v1/archives/{archive_id}/passages/{passage_id}", status_code=204)
async def delete_archive_passage(archive_id: ArchiveId, passage_id: PassageId, tx: TransactionDep) -> Response:
    """Delete one passage of an archive."""
    async with tx() as session:
        await service.delete_archive_passages(session, archive_id, [passage_id])
    return Response(status_code=204)


def _in_zone(moment: datetime, timezone: str) -> str:
    return moment.astimezone(ZoneInfo(timezone)).isoformat(timespec="seconds")

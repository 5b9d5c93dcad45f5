"""Vector search over archival passages (archival memory), every filter applied in SQL before the limit."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Select, cast, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.orm import Passage
from memvm.search.fusion import fuse_rankings
from memvm.search.vector_index import prefer_vector_index, same_model

# What a search result needs (never the vector: parsing 384+ floats per row is not free).
RESULT_COLUMNS = (
    Passage.id,
    Passage.archive_id,
    Passage.text,
    Passage.tags,
    Passage.metadata_,
    Passage.embedding_model,
    Passage.embedding_dim,
    Passage.writer_id,
    Passage.created_at,
)


@dataclass(frozen=True)
class PassageHit:
    passage: Any  # a row with the RESULT_COLUMNS as attributes (PassageRead.of reads it)
    distance: float  # cosine distance, 0 = same direction

    @property
    def relevance(self) -> float:
        return 1.0 - self.distance


@dataclass(frozen=True)
class PassageSearch:
    """One search over some archives' passages of one embedding model; `query_vector` None lists the
    newest matching passages instead (distance 0)."""

    archive_ids: Sequence[str]
    model: str
    dim: int
    query_vector: Sequence[float] | None
    top_k: int
    tags: Sequence[str] = ()
    match_all_tags: bool = False
    start: datetime | None = None
    end: datetime | None = None

    def statement(self) -> Select[*tuple[Any, ...]]:
        """The SELECT `search_passages` runs: RESULT_COLUMNS and `distance`, nearest first."""
        if self.query_vector is None:
            distance = literal(0.0).label("distance")
        else:
            distance = cast(Passage.embedding, Vector(self.dim)).cosine_distance(list(self.query_vector)).label("distance")
        query = select(*RESULT_COLUMNS, distance).where(
            Passage.archive_id.in_(list(self.archive_ids)),
            same_model(Passage.embedding_model, Passage.embedding_dim, self.model, self.dim),
        )
        if self.tags:
            tags = list(self.tags)
            query = query.where(Passage.tags.contains(tags) if self.match_all_tags else Passage.tags.overlap(tags))
        if self.start is not None:
            query = query.where(Passage.created_at >= self.start)
        if self.end is not None:
            query = query.where(Passage.created_at <= self.end)
        # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
        order = distance if self.query_vector is not None else Passage.created_at.desc()
        nearest = query.order_by(order).limit(self.top_k).cte("nearest").prefix_with("MATERIALIZED")
        return select(nearest).order_by(nearest.c.distance, nearest.c.created_at.desc())


async def search_passages(session: AsyncSession, search: PassageSearch) -> list[PassageHit]:
    """The search's rows, run under this transaction's vector search settings."""
    with metrics.timed(metrics.SEARCH_SECONDS, "archival"):
        await prefer_vector_index(session, search.top_k)
        rows = await session.execute(search.statement())
    return [PassageHit(row, float(row.distance)) for row in rows]


@dataclass(frozen=True)
class MergedHit:
    """A hit of a search over archives of several embedding models: its rank among its own model's
    hits and its fused score (reciprocal rank fusion); both None in a listing without a query."""

    hit: PassageHit
    model_rank: int | None = None
    rrf_score: float | None = None


def fuse_by_rank(rankings: Sequence[Sequence[PassageHit]], limit: int) -> list[MergedHit]:
    """One list from one ranking per embedding model. Distances of two models are not comparable, so
    only the ranks count: reciprocal rank fusion (with one model, the order stays by distance)."""
    placed = {hit.passage.id: (hit, rank) for hits in rankings for rank, hit in enumerate(hits, start=1)}
    fused = fuse_rankings([[hit.passage.id for hit in hits] for hits in rankings], limit=limit)
    return [MergedHit(placed[item][0], placed[item][1], score) for item, score in fused]


def newest_first(listings: Sequence[Sequence[PassageHit]], limit: int) -> list[MergedHit]:
    """One list from the newest passages of each model, as a single listing would order them."""
    hits = sorted((hit for listing in listings for hit in listing), key=lambda hit: hit.passage.created_at, reverse=True)
    return [MergedHit(hit) for hit in hits[:limit]]

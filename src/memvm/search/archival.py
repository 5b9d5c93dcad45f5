"""Vector search over archival passages, every filter applied in SQL before the limit."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, Select, cast, literal, literal_column, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.db.engine import DEFAULT_EF_SEARCH
from memvm.orm import Passage

# What a search result needs (never the vector: parsing 384+ floats per row is not free).
RESULT_COLUMNS = (Passage.id, Passage.archive_id, Passage.text, Passage.tags, Passage.metadata_, Passage.embedding_model,
                  Passage.embedding_dim, Passage.writer_id, Passage.created_at)


@dataclass(frozen=True)
class PassageHit:
    passage: Any  # a row with the RESULT_COLUMNS as attributes (PassageRead.of reads it)
    distance: float  # cosine distance, 0 = same direction

    @property
    def relevance(self) -> float:
        return 1.0 - self.distance


async def widen_index_scan(session: AsyncSession, top_k: int) -> None:
    """HNSW returns at most ef_search rows per scan pass: keep it at least 2 × top_k (the engine's
    session default covers top_k ≤ 50 without this extra round trip)."""
    if 2 * top_k > DEFAULT_EF_SEARCH:
        await session.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(2 * top_k)})


def same_model(model_column: ColumnElement, dim_column: ColumnElement, model: str, dim: int) -> ColumnElement[bool]:
    """The dimension goes into the SQL text, not a parameter: a generic prepared plan can then still
    prove the partial HNSW index's `embedding_dim = <dim>` predicate."""
    return (model_column == model) & (dim_column == literal_column(str(int(dim))))


async def search_passages(
    session: AsyncSession,
    *,
    archive_ids: Sequence[str],
    model: str,
    dim: int,
    query_vector: Sequence[float] | None,
    top_k: int,
    tags: Sequence[str] = (),
    match_all_tags: bool = False,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[PassageHit]:
    """Nearest first; without a query vector, the newest matching passages (distance 0)."""
    await widen_index_scan(session, top_k)
    if query_vector is None:
        distance = literal(0.0).label("distance")
    else:
        distance = cast(Passage.embedding, Vector(dim)).cosine_distance(list(query_vector)).label("distance")
    query: Select = select(*RESULT_COLUMNS, distance).where(
        Passage.archive_id.in_(list(archive_ids)), same_model(Passage.embedding_model, Passage.embedding_dim, model, dim)
    )
    if tags:
        query = query.where(Passage.tags.contains(list(tags)) if match_all_tags else Passage.tags.overlap(list(tags)))
    if start is not None:
        query = query.where(Passage.created_at >= start)
    if end is not None:
        query = query.where(Passage.created_at <= end)
    # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
    order = distance if query_vector is not None else Passage.created_at.desc()
    nearest = query.order_by(order).limit(top_k).cte("nearest").prefix_with("MATERIALIZED")
    rows = await session.execute(select(nearest).order_by(nearest.c.distance, nearest.c.created_at.desc()))
    return [PassageHit(row, float(row.distance)) for row in rows]

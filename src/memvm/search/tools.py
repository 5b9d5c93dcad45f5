"""Hybrid search over the tools an organization sees (its own and the shared built-ins), in
PostgreSQL: a weighted full-text ranking (the name counts most, then the description, parameters and
tags, the source least) and a vector ranking, fused with reciprocal rank fusion as message search is."""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from sqlalchemy import ColumnElement, Select, cast, func, select
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvm.orm import Tool
from memvm.orm.vector_type import Float4Vector
from memvm.search.conversation import CANDIDATES, QueryVector, SearchMode, query_lexemes
from memvm.search.fusion import Fused, reciprocal_rank_fusion
from memvm.search.vector_index import prefer_vector_index, same_model


@dataclass(frozen=True)
class ToolSearch:
    """A blank `query` lists the matching tools newest first instead."""

    query: str
    vector: QueryVector | None
    mode: SearchMode = "hybrid"
    tool_types: Sequence[str] = ()
    tags: Sequence[str] = ()  # any of them
    limit: int = 50

    def filtered(self, query: Select[Any]) -> Select[Any]:
        if self.tool_types:
            query = query.where(Tool.tool_type.in_(list(self.tool_types)))
        if self.tags:
            query = query.where(Tool.tags.overlap(list(self.tags)))
        return query


@dataclass(frozen=True)
class ToolHit:
    tool: Tool
    score: Fused | None  # None when listed without a query


async def search_tools(session: AsyncSession, search: ToolSearch) -> list[ToolHit]:
    """Best first. Without a query vector (not embedded, or fts mode) only the full text ranks."""
    if not search.query.strip():
        newest = search.filtered(select(Tool)).order_by(Tool.created_at.desc(), Tool.id).limit(search.limit)
        return [ToolHit(tool, None) for tool in await session.scalars(newest)]
    candidates = max(CANDIDATES, 2 * search.limit)
    base = search.filtered(select(Tool.id))
    fts_ids = await _fts_ranking(session, base, search.query, candidates) if search.mode in ("hybrid", "fts") else []
    vector_ids: list[str] = []
    if search.mode in ("hybrid", "vector") and search.vector is not None:
        vector_ids = await _vector_ranking(session, base, search.vector, candidates)
    fused = reciprocal_rank_fusion(fts_ids, vector_ids, limit=search.limit)
    found = {tool.id: tool for tool in await session.scalars(select(Tool).where(Tool.id.in_([f.id for f in fused])))}
    return [ToolHit(found[f.id], f) for f in fused if f.id in found]


async def _fts_ranking(session: AsyncSession, base: Select[Any], query: str, limit: int) -> list[str]:
    """Tools matching any query word, by ts_rank over the weighted document: a tool's name outranks
    its description, which outranks its source."""
    lexemes = await query_lexemes(session, query)
    if not lexemes:
        return []
    terms: list[ColumnElement[Any]] = [cast(func.quote_literal(lexeme), TSQUERY) for lexeme in lexemes]
    any_term = reduce(lambda left, right: left.op("||", return_type=TSQUERY)(right), terms)
    rank = func.ts_rank(Tool.fts, any_term)
    ranked = base.where(Tool.fts.op("@@")(any_term)).order_by(rank.desc(), Tool.name, Tool.id).limit(limit)
    return list(await session.scalars(ranked))


async def _vector_ranking(session: AsyncSession, base: Select[Any], vector: QueryVector, limit: int) -> list[str]:
    await prefer_vector_index(session, limit)
    distance = cast(Tool.embedding, Float4Vector(vector.dim)).cosine_distance(list(vector.values))
    nearest = (
        base.add_columns(distance.label("distance"))
        .where(same_model(Tool.embedding_model, Tool.embedding_dim, vector.model, vector.dim))
        .order_by(distance)
        .limit(limit)
    )
    # relaxed_order can return neighbours slightly out of order: rank on the exact distances.
    return [row.id for row in sorted(await session.execute(nearest), key=lambda row: row.distance)]

"""Search over archival passages (archival memory), every filter applied in SQL before the limit:
by vector alone, or hybrid (a full-text ranking by term rarity and the vector ranking, fused by
reciprocal rank fusion with the deployment's k; search/tuning.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Select, cast, func, literal, select, union_all
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.orm import Passage
from memvm.search.conversation import CANDIDATES, VECTOR_BRANCH, query_lexemes
from memvm.search.fusion import fuse_rankings, reciprocal_rank_fusion
from memvm.search.lexical import TermMatch, rank_by_term_rarity
from memvm.search.tuning import DEFAULT_TUNING, SearchTuning
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
    newest matching passages instead (distance 0). `query` is the text the vector came from (what a
    hybrid search also ranks by its words)."""

    archive_ids: Sequence[str]
    model: str
    dim: int
    query_vector: Sequence[float] | None
    top_k: int
    tags: Sequence[str] = ()
    match_all_tags: bool = False
    start: datetime | None = None
    end: datetime | None = None
    query: str = ""

    def statement(self) -> Select[*tuple[Any, ...]]:
        """The SELECT a vector-only search runs: RESULT_COLUMNS and `distance`, nearest first."""
        # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
        nearest = self._ordered(self._distance(), self.top_k).cte("nearest").prefix_with("MATERIALIZED")
        return select(nearest).order_by(nearest.c.distance, nearest.c.created_at.desc())

    def hybrid_statement(self, lexemes: Sequence[str], candidates: int) -> Select[*tuple[Any, ...]]:
        """Both rankings' candidates in one statement (UNION ALL): the `candidates` nearest passages
        (`term` VECTOR_BRANCH) and, per query lexeme, the `candidates` newest passages that contain it
        (`term` = the lexeme's index), each row with its distance; rank_hybrid orders them."""
        distance = self._distance()
        vector = self._ordered(distance, candidates).add_columns(literal(VECTOR_BRANCH).label("term"))
        words = [
            self._filtered(distance)
            .add_columns(literal(term).label("term"))
            .where(Passage.fts.op("@@")(cast(func.quote_literal(lexeme), TSQUERY)))
            .order_by(Passage.created_at.desc())
            .limit(candidates)
            for term, lexeme in enumerate(lexemes)
        ]
        # Selected from, not run bare: rows keep RESULT_COLUMNS' attribute names (metadata_).
        return select(union_all(vector, *words).subquery("candidate"))

    def _distance(self) -> Any:
        if self.query_vector is None:
            return literal(0.0).label("distance")
        return cast(Passage.embedding, Vector(self.dim)).cosine_distance(list(self.query_vector)).label("distance")

    def _ordered(self, distance: Any, limit: int) -> Select[*tuple[Any, ...]]:
        """The filtered passages, nearest first (newest first without a query vector)."""
        order = distance if self.query_vector is not None else Passage.created_at.desc()
        return self._filtered(distance).order_by(order).limit(limit)

    def _filtered(self, distance: Any) -> Select[*tuple[Any, ...]]:
        """RESULT_COLUMNS and `distance` of the passages every filter admits."""
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
        return query


async def search_passages(
    session: AsyncSession, search: PassageSearch, tuning: SearchTuning = DEFAULT_TUNING
) -> list[PassageHit]:
    """The search's hits, best first, run under this transaction's vector search settings: two
    statements when hybrid (the query's lexemes, then both rankings' candidates), else one."""
    hybrid = tuning.archival_hybrid and search.query_vector is not None and bool(search.query.strip())
    candidates = max(CANDIDATES, 2 * search.top_k) if hybrid else search.top_k
    with metrics.timed(metrics.SEARCH_SECONDS, "archival"):
        await prefer_vector_index(session, candidates)
        if not hybrid:
            return [PassageHit(row, float(row.distance)) for row in await session.execute(search.statement())]
        lexemes = await query_lexemes(session, search.query)
        rows = list(await session.execute(search.hybrid_statement(lexemes, candidates)))
    return rank_hybrid(rows, candidates=candidates, limit=search.top_k, rrf_k=tuning.rrf_k)


def rank_hybrid(rows: Sequence[Any], *, candidates: int, limit: int, rrf_k: int) -> list[PassageHit]:
    """The candidates fused: full-text matches ranked by term rarity (search.lexical; newer wins a
    tie), the vector ones by exact distance (relaxed_order can return neighbours slightly out of order)."""
    by_id = {row.id: row for row in rows}
    matches = [TermMatch(row.term, row.id, _microseconds(row.created_at)) for row in rows if row.term != VECTOR_BRANCH]
    fts_ids = rank_by_term_rarity(matches, window=candidates, limit=candidates)
    nearest = sorted((row for row in rows if row.term == VECTOR_BRANCH), key=lambda row: row.distance)
    fused = reciprocal_rank_fusion(fts_ids, [row.id for row in nearest], limit=limit, k=rrf_k)
    return [PassageHit(by_id[f.id], float(by_id[f.id].distance)) for f in fused]


def _microseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


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

"""Search over archival passages (archival memory), every filter applied in SQL before the limit:
by vector alone, or hybrid (a full-text ranking by term rarity and the vector ranking, fused by
reciprocal rank fusion with the deployment's k; search/tuning.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ColumnElement, Select, cast, func, literal, select, union_all
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.orm import Passage
from memvm.search.conversation import CANDIDATES, VECTOR_BRANCH, query_lexemes
from memvm.search.fusion import fuse_rankings, reciprocal_rank_fusion
from memvm.search.lexical import TermMatch, rank_by_term_rarity
from memvm.search.tuning import DEFAULT_TUNING, SearchTuning
from memvm.search.vector_index import index_pays_statement, prefer_vector_index, same_model

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

    def statement(self, *, indexed: bool) -> Select[*tuple[Any, ...]]:
        """The SELECT a vector-only search runs: RESULT_COLUMNS and `distance`, nearest first, through
        the HNSW index or exactly (`indexed`: index_pays)."""
        # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
        nearest = self._nearest(self.top_k, indexed).cte("nearest").prefix_with("MATERIALIZED")
        return select(nearest).order_by(nearest.c.distance, nearest.c.created_at.desc())

    def hybrid_statement(self, lexemes: Sequence[str], candidates: int, *, indexed: bool) -> Select[*tuple[Any, ...]]:
        """Both rankings' candidates in one statement (UNION ALL): the `candidates` nearest passages
        (`term` VECTOR_BRANCH) and, per query lexeme, the `candidates` newest passages that contain it
        (`term` = the lexeme's index), each row with its distance; rank_hybrid orders them."""
        vector = self._nearest(candidates, indexed).add_columns(literal(VECTOR_BRANCH).label("term"))
        words = [
            self._newest_containing(lexeme, candidates).add_columns(literal(term).label("term"))
            for term, lexeme in enumerate(lexemes)
        ]
        # Selected from, not run bare: rows keep RESULT_COLUMNS' attribute names (metadata_).
        return select(union_all(vector, *words).subquery("candidate"))

    def _newest_containing(self, lexeme: str, limit: int) -> Select[*tuple[Any, ...]]:
        """The `limit` newest filtered passages whose text has the lexeme, with their distance, which is
        computed outside the LIMIT: a common word matches thousands of passages, and reading each one's
        vector (6 kB, out of line, at 1536-d) cost more than the rest of the search."""
        newest = (
            select(*RESULT_COLUMNS, Passage.embedding)
            .where(self._same_model(), *self._conditions(Passage))
            .where(Passage.fts.op("@@")(cast(func.quote_literal(lexeme), TSQUERY)))
            .order_by(Passage.created_at.desc())
            .limit(limit)
            .subquery("newest")
        )
        return select(*(c for c in newest.c if c.key != "embedding"), self._distance(newest.c.embedding))

    def index_pays_statement(self, candidates: int) -> Select[*tuple[Any, ...]] | None:
        """Whether enough passages pass the filters for the HNSW index to beat an exact scan
        (search.vector_index); None when no index covers the dimension. Filters count too: a tag on 2 %
        of an archive makes the index scan visit 50 times as many passages per candidate. The model is
        left out (an archive's passages are all of its model): without filters, or with dates, the count
        reads the (archive_id, created_at) index alone."""
        scope = select(Passage.id).where(*self._conditions(Passage))
        return index_pays_statement(scope, Passage.__tablename__, self.dim, candidates)

    def _distance(self, embedding: Any = Passage.embedding) -> Any:
        """`distance`: the cosine distance of `embedding` (a column of the passages) to the query
        vector, cast to the dimension the partial HNSW index is on; 0 without a query vector."""
        if self.query_vector is None:
            return literal(0.0).label("distance")
        return cast(embedding, Vector(self.dim)).cosine_distance(list(self.query_vector)).label("distance")

    def _nearest(self, limit: int, indexed: bool) -> Select[*tuple[Any, ...]]:
        """The `limit` nearest filtered passages (newest first without a query vector), by a plan the
        caller chose, since the planner misjudges both: it prices reading and comparing a vector like
        any column, so it sorts 10,000 passages of 1536-d exactly (50 ms) where the index takes 3, and
        it may walk the index for an archive that is a sliver of it (hundreds of ms)."""
        if self.query_vector is None:
            return self._filtered(self._distance()).order_by(Passage.created_at.desc()).limit(limit)
        if not indexed:
            # the bare column: no index matches this order, so the planner sorts the filtered rows exactly
            exact = Passage.embedding.cosine_distance(list(self.query_vector))
            return self._filtered(exact.label("distance")).order_by(exact).limit(limit)
        # All passages of the model in the index's order; OFFSET 0 keeps the filters out of this subquery
        # (no bitmap scan + sort can replace the index walk), and the iterative scan streams rows to the
        # filters until `limit` pass. No ORDER BY outside: it would make the scan read the whole index.
        distance = self._distance()
        ranked = select(*RESULT_COLUMNS, distance).where(self._same_model()).order_by(distance).offset(0).subquery("ranked")
        return select(ranked).where(*self._conditions(ranked.c)).limit(limit)

    def _filtered(self, distance: Any) -> Select[*tuple[Any, ...]]:
        """RESULT_COLUMNS and `distance` of the passages every filter admits."""
        return select(*RESULT_COLUMNS, distance).where(self._same_model(), *self._conditions(Passage))

    def _same_model(self) -> ColumnElement[bool]:
        return same_model(Passage.embedding_model, Passage.embedding_dim, self.model, self.dim)

    def _conditions(self, columns: Any) -> list[ColumnElement[bool]]:
        """The archive, tag and date filters on `columns` (Passage itself, or a subquery's columns)."""
        conditions = [columns.archive_id.in_(list(self.archive_ids))]
        if self.tags:
            tags = list(self.tags)
            conditions.append(columns.tags.contains(tags) if self.match_all_tags else columns.tags.overlap(tags))
        if self.start is not None:
            conditions.append(columns.created_at >= self.start)
        if self.end is not None:
            conditions.append(columns.created_at <= self.end)
        return conditions


async def search_passages(
    session: AsyncSession, search: PassageSearch, tuning: SearchTuning = DEFAULT_TUNING
) -> list[PassageHit]:
    """The search's hits, best first, run under this transaction's vector search settings: the
    query's lexemes when hybrid, then both rankings' candidates (or the nearest alone) in one statement,
    through the HNSW index when the archives are big enough for it to pay (else exactly)."""
    hybrid = tuning.archival_hybrid and search.query_vector is not None and bool(search.query.strip())
    candidates = max(CANDIDATES, 2 * search.top_k) if hybrid else search.top_k
    with metrics.timed(metrics.SEARCH_SECONDS, "archival"):
        await prefer_vector_index(session, candidates)
        indexed = await index_pays(session, search, candidates)
        lexemes = await query_lexemes(session, search.query) if hybrid else None
        rows = list(await session.execute(_statement(search, lexemes, candidates, indexed)))
        if indexed and _nearest_found(rows, hybrid) < candidates:
            # The index scan stopped (hnsw.max_scan_tuples) before the filters admitted enough passages,
            # or fewer match: the exact search finds every match.
            rows = list(await session.execute(_statement(search, lexemes, candidates, indexed=False)))
    if not hybrid:
        return [PassageHit(row, float(row.distance)) for row in rows]
    return rank_hybrid(rows, candidates=candidates, limit=search.top_k, rrf_k=tuning.rrf_k)


async def index_pays(session: AsyncSession, search: PassageSearch, candidates: int) -> bool:
    """Whether this search should walk the HNSW index for its `candidates` nearest (run after the
    transaction's vector search settings: the count is planned without sequential scans)."""
    statement = search.index_pays_statement(candidates) if search.query_vector is not None else None
    return statement is not None and bool(await session.scalar(statement))


def _statement(search: PassageSearch, lexemes: Sequence[str] | None, candidates: int, indexed: bool) -> Select[*tuple[Any, ...]]:
    if lexemes is None:
        return search.statement(indexed=indexed)
    return search.hybrid_statement(lexemes, candidates, indexed=indexed)


def _nearest_found(rows: Sequence[Any], hybrid: bool) -> int:
    return sum(row.term == VECTOR_BRANCH for row in rows) if hybrid else len(rows)


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

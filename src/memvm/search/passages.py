"""Search over archival passages (archival memory), every filter applied in SQL before the limit:
by vector alone, or hybrid (a full-text ranking by term rarity and the vector ranking, fused by
reciprocal rank fusion with the deployment's k; search/tuning.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import BindParameter, ColumnElement, Integer, Select, String, bindparam, cast, func, literal, select, union_all
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.orm import Passage
from memvm.search.conversation import CANDIDATES, VECTOR_BRANCH, lexemes_and_vector_settings
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
class _Shape:
    """What the SQL text of a search depends on. Each shape's statements are built once (below), with
    every value a named parameter: building the hybrid SELECT took 5-7 ms of CPU per search, and a
    statement built once also keeps its cache key and its organization-scoped copies (db/tenancy.py)."""

    dim: int
    vector: bool  # with a query vector (else the newest passages, distance 0)
    tags: str  # "any", "all" or "" (no tag filter)
    start: bool
    end: bool


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
        """The SELECT a vector-only search runs (its `parameters(top_k)`): RESULT_COLUMNS and
        `distance`, nearest first, through the HNSW index or exactly (`indexed`: index_pays)."""
        return _vector_only(self._shape, indexed)

    def hybrid_statement(self, lexemes: int, *, indexed: bool) -> Select[*tuple[Any, ...]]:
        """Both rankings' candidates in one statement (UNION ALL; its `parameters(candidates, lexemes)`):
        the `candidates` nearest passages (`term` VECTOR_BRANCH) and, per query lexeme, the `candidates`
        newest passages that contain it (`term` = the lexeme's index), each row with its distance;
        rank_hybrid orders them."""
        return _hybrid(self._shape, lexemes, indexed)

    def index_pays_statement(self) -> Select[*tuple[Any, ...]] | None:
        """Whether enough passages pass the filters for the HNSW index to beat an exact scan
        (search.vector_index; its `parameters(candidates)`); None when no index covers the dimension.
        Filters count too: a tag on 2 % of an archive makes the index scan visit 50 times as many
        passages per candidate. The model is left out (an archive's passages are all of its model):
        without filters, or with dates, the count reads the (archive_id, created_at) index alone."""
        return _index_pays(self._shape)

    def parameters(self, candidates: int, lexemes: Sequence[str] = ()) -> dict[str, Any]:
        """The values of this search for its statements, which are built once per _Shape."""
        values: dict[str, Any] = {"archive_ids": list(self.archive_ids), "model": self.model, "limit": candidates}
        values.update((_lexeme_name(term), lexeme) for term, lexeme in enumerate(lexemes))
        if self.query_vector is not None:
            values["query_vector"] = list(self.query_vector)
        if self.tags:
            values["tags"] = list(self.tags)
        values.update((name, bound) for name, bound in (("start", self.start), ("end", self.end)) if bound is not None)
        return values

    @property
    def _shape(self) -> _Shape:
        tags = ("all" if self.match_all_tags else "any") if self.tags else ""
        return _Shape(self.dim, self.query_vector is not None, tags, self.start is not None, self.end is not None)


# Every branch's LIMIT (top_k for a vector-only search, each ranking's candidates for a hybrid one),
# and the index_pays count's candidates.
_LIMIT = bindparam("limit", type_=Integer)
# Enough for the shapes a deployment uses (a few dimensions × filters × lexeme counts); past it, rebuilt.
_SHAPES = 256


@lru_cache(maxsize=_SHAPES)
def _vector_only(shape: _Shape, indexed: bool) -> Select[*tuple[Any, ...]]:
    # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
    nearest = _nearest(shape, indexed).cte("nearest").prefix_with("MATERIALIZED")
    return select(nearest).order_by(nearest.c.distance, nearest.c.created_at.desc())


@lru_cache(maxsize=_SHAPES)
def _hybrid(shape: _Shape, lexemes: int, indexed: bool) -> Select[*tuple[Any, ...]]:
    vector = _nearest(shape, indexed).add_columns(literal(VECTOR_BRANCH).label("term"))
    words = [_newest_containing(shape, term).add_columns(literal(term).label("term")) for term in range(lexemes)]
    # Selected from, not run bare: rows keep RESULT_COLUMNS' attribute names (metadata_).
    return select(union_all(vector, *words).subquery("candidate"))


@lru_cache(maxsize=_SHAPES)
def _index_pays(shape: _Shape) -> Select[*tuple[Any, ...]] | None:
    scope = select(Passage.id).where(*_conditions(shape, Passage))
    return index_pays_statement(scope, Passage.__tablename__, shape.dim, _LIMIT)


def _lexeme_name(term: int) -> str:
    return f"lexeme_{term}"


def _newest_containing(shape: _Shape, term: int) -> Select[*tuple[Any, ...]]:
    """The newest filtered passages whose text has the lexeme numbered `term`, with their distance,
    which is computed outside the LIMIT: a common word matches thousands of passages, and reading each
    one's vector (6 kB, out of line, at 1536-d) cost more than the rest of the search."""
    lexeme = bindparam(_lexeme_name(term), type_=String)
    newest = (
        select(*RESULT_COLUMNS, Passage.embedding)
        .where(_same_model(shape), *_conditions(shape, Passage))
        .where(Passage.fts.op("@@")(cast(func.quote_literal(lexeme), TSQUERY)))
        .order_by(Passage.created_at.desc())
        .limit(_LIMIT)
        .subquery("newest")
    )
    return select(*(c for c in newest.c if c.key != "embedding"), _distance(shape, newest.c.embedding))


def _distance(shape: _Shape, embedding: Any = Passage.embedding) -> Any:
    """`distance`: the cosine distance of `embedding` (a column of the passages) to the query vector,
    cast to the dimension the partial HNSW index is on; 0 without a query vector."""
    if not shape.vector:
        return literal(0.0).label("distance")
    return cast(embedding, Vector(shape.dim)).cosine_distance(_query_vector(shape)).label("distance")


def _query_vector(shape: _Shape) -> BindParameter[Any]:
    """The query vector, one parameter however many branches compare with it (same name, same `$n`):
    turning 1,536 floats into pgvector's text costs about 1 ms, once per value sent."""
    return bindparam("query_vector", type_=Vector(shape.dim))


def _nearest(shape: _Shape, indexed: bool) -> Select[*tuple[Any, ...]]:
    """The nearest filtered passages (newest first without a query vector), by a plan the caller chose,
    since the planner misjudges both: it prices reading and comparing a vector like any column, so it
    sorts 10,000 passages of 1536-d exactly (50 ms) where the index takes 3, and it may walk the index
    for an archive that is a sliver of it (hundreds of ms)."""
    if not shape.vector:
        return _filtered(shape, _distance(shape)).order_by(Passage.created_at.desc()).limit(_LIMIT)
    if not indexed:
        # the bare column: no index matches this order, so the planner sorts the filtered rows exactly
        exact = Passage.embedding.cosine_distance(_query_vector(shape))
        return _filtered(shape, exact.label("distance")).order_by(exact).limit(_LIMIT)
    # All passages of the model in the index's order; OFFSET 0 keeps the filters out of this subquery
    # (no bitmap scan + sort can replace the index walk), and the iterative scan streams rows to the
    # filters until `limit` pass. No ORDER BY outside: it would make the scan read the whole index.
    distance = _distance(shape)
    ranked = select(*RESULT_COLUMNS, distance).where(_same_model(shape)).order_by(distance).offset(0).subquery("ranked")
    return select(ranked).where(*_conditions(shape, ranked.c)).limit(_LIMIT)


def _filtered(shape: _Shape, distance: Any) -> Select[*tuple[Any, ...]]:
    """RESULT_COLUMNS and `distance` of the passages every filter admits."""
    return select(*RESULT_COLUMNS, distance).where(_same_model(shape), *_conditions(shape, Passage))


def _same_model(shape: _Shape) -> ColumnElement[bool]:
    return same_model(Passage.embedding_model, Passage.embedding_dim, bindparam("model", type_=String), shape.dim)


def _conditions(shape: _Shape, columns: Any) -> list[ColumnElement[bool]]:
    """The archive, tag and date filters on `columns` (Passage itself, or a subquery's columns)."""
    conditions = [columns.archive_id.in_(bindparam("archive_ids", type_=String, expanding=True))]
    if shape.tags:
        tags = bindparam("tags", type_=Passage.tags.type)
        conditions.append(columns.tags.contains(tags) if shape.tags == "all" else columns.tags.overlap(tags))
    if shape.start:
        conditions.append(columns.created_at >= bindparam("start", type_=Passage.created_at.type))
    if shape.end:
        conditions.append(columns.created_at <= bindparam("end", type_=Passage.created_at.type))
    return conditions


async def search_passages(
    session: AsyncSession, search: PassageSearch, tuning: SearchTuning = DEFAULT_TUNING
) -> list[PassageHit]:
    """The search's hits, best first, run under this transaction's vector search settings (set in
    the round trip that gets the query's lexemes when hybrid), then both rankings' candidates (or the
    nearest alone) in one statement, through the HNSW index when the archives are big enough for it to
    pay (else exactly)."""
    hybrid = tuning.archival_hybrid and search.query_vector is not None and bool(search.query.strip())
    candidates = max(CANDIDATES, 2 * search.top_k) if hybrid else search.top_k
    with metrics.timed(metrics.SEARCH_SECONDS, "archival"):
        lexemes = await _prepare(session, search.query if hybrid else None, candidates)
        indexed = await index_pays(session, search, candidates)
        parameters = search.parameters(candidates, lexemes or ())
        rows = list(await session.execute(_statement(search, lexemes, indexed), parameters))
        if indexed and _nearest_found(rows, hybrid) < candidates:
            # The index scan stopped (hnsw.max_scan_tuples) before the filters admitted enough passages,
            # or fewer match: the exact search finds every match.
            rows = list(await session.execute(_statement(search, lexemes, indexed=False), parameters))
    if not hybrid:
        return [PassageHit(row, float(row.distance)) for row in rows]
    return rank_hybrid(rows, candidates=candidates, limit=search.top_k, rrf_k=tuning.rrf_k)


async def _prepare(session: AsyncSession, query: str | None, candidates: int) -> list[str] | None:
    """The vector search settings, and the lexemes of a hybrid search's `query` in the same round trip."""
    if query is None:
        await prefer_vector_index(session, candidates)
        return None
    return await lexemes_and_vector_settings(session, query, candidates)


async def index_pays(session: AsyncSession, search: PassageSearch, candidates: int) -> bool:
    """Whether this search should walk the HNSW index for its `candidates` nearest (run after the
    transaction's vector search settings: the count is planned without sequential scans)."""
    statement = search.index_pays_statement() if search.query_vector is not None else None
    return statement is not None and bool(await session.scalar(statement, search.parameters(candidates)))


def _statement(search: PassageSearch, lexemes: Sequence[str] | None, indexed: bool) -> Select[*tuple[Any, ...]]:
    if lexemes is None:
        return search.statement(indexed=indexed)
    return search.hybrid_statement(len(lexemes), indexed=indexed)


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

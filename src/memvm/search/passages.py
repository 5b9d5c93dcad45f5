"""Search over archival passages (archival memory), every filter applied in SQL before the limit:
by vector alone, or hybrid (a full-text ranking by term rarity and the vector ranking, fused by
reciprocal rank fusion with the deployment's k; search/tuning.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm import metrics
from memvm.db import direct
from memvm.db.direct import Direct
from memvm.db.vectors import vector_bytes
from memvm.search import passage_statements as statements
from memvm.search.conversation import CANDIDATES, VECTOR_BRANCH
from memvm.search.fusion import fuse_rankings, reciprocal_rank_fusion
from memvm.search.lexical import TermMatch, rank_by_term_rarity, recency_of
from memvm.search.passage_statements import Preparation, Shape
from memvm.search.tuning import DEFAULT_TUNING, SearchTuning
from memvm.search.vector_index import vector_search_parameters


@dataclass(frozen=True)
class PassageHit:
    passage: Any  # a row with passage_statements.RESULT_COLUMNS as attributes (PassageRead.of reads it)
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

    def statement(self, *, indexed: bool) -> Direct:
        """The SELECT a vector-only search runs (its `parameters(top_k)`): RESULT_COLUMNS and
        `distance`, nearest first, through the HNSW index or exactly (`indexed`: index_pays)."""
        return statements.vector_only(self._shape, indexed)

    def hybrid_statement(self, lexemes: int) -> Direct:
        """Both rankings' candidates in one statement, the nearest found exactly (UNION ALL; its
        `parameters(candidates, lexemes)`): the `candidates` nearest passages (`term` VECTOR_BRANCH,
        with their distance) and, per query lexeme, the `candidates` newest passages that contain it
        (`term` = the lexeme's index), each row CANDIDATE_COLUMNS; rank_hybrid orders them."""
        return statements.hybrid(self._shape, lexemes)

    def nearest_statement(self, *, indexed: bool) -> Direct:
        """A hybrid search's nearest `candidates` alone (`term` VECTOR_BRANCH; its `parameters(candidates)`):
        through the index the vector ranking and the lexemes' matches need plans of their own
        (vector_index.sorts_back_on)."""
        return statements.nearest_candidates(self._shape, indexed)

    def lexeme_statement(self, lexemes: int) -> Direct:
        """A hybrid search's full-text candidates alone: each lexeme's `candidates` newest matches."""
        return statements.lexeme_candidates(self._shape, lexemes)

    def chosen_statement(self) -> Direct:
        """The passages a hybrid search kept, by id (its `chosen_parameters`), with their distance."""
        return statements.chosen(self._shape)

    def chosen_parameters(self, ids: Sequence[str]) -> dict[str, Any]:
        return {"ids": list(ids), "query_vector": self._query_vector_bytes}

    def index_pays_statement(self) -> Direct | None:
        """Whether enough passages pass the filters for the HNSW index to beat an exact scan
        (search.vector_index; its `filter_parameters(candidates)`); None when no index covers the dimension.
        Filters count too: a tag on 2 % of an archive makes the index scan visit 50 times as many
        passages per candidate. The model is left out (an archive's passages are all of its model).
        Without filters the archives' kept passage counts say it; with dates the count reads the
        (archive_id, created_at) index alone."""
        return statements.index_pays(self._shape)

    def preparation(self, hybrid: bool) -> Preparation:
        """The transaction's first statement (`prepare`)."""
        return statements.preparation(self._shape, hybrid)

    def parameters(self, candidates: int, lexemes: Sequence[str] = ()) -> dict[str, Any]:
        """The values of this search for its ranking statements, which are built once per Shape (a
        direct statement takes exactly its own: the lexemes go to the statements that match them)."""
        values = self.lexeme_parameters(candidates, lexemes)
        if self.query_vector is not None:
            values["query_vector"] = self._query_vector_bytes
        return values

    def lexeme_parameters(self, candidates: int, lexemes: Sequence[str]) -> dict[str, Any]:
        """The values of `lexeme_statement` (which compares no vector)."""
        values = self.filter_parameters(candidates)
        values["model"] = self.model
        values.update((statements.lexeme_name(term), lexeme) for term, lexeme in enumerate(lexemes))
        return values

    def filter_parameters(self, candidates: int) -> dict[str, Any]:
        """The archives, the filters' values and the `limit`: what the index_pays count takes."""
        values: dict[str, Any] = {"archive_ids": list(self.archive_ids), "limit": candidates}
        if self.tags:
            values["tags"] = list(self.tags)
        values.update((name, bound) for name, bound in (("start", self.start), ("end", self.end)) if bound is not None)
        return values

    @cached_property
    def _query_vector_bytes(self) -> bytes:
        """The query vector packed for the wire, once however many statements the search sends."""
        assert self.query_vector is not None, "only a search with a query vector sends one"
        return vector_bytes(self.query_vector)

    @property
    def _shape(self) -> Shape:
        tags = ("all" if self.match_all_tags else "any") if self.tags else ""
        return Shape(self.dim, self.query_vector is not None, tags, self.start is not None, self.end is not None)


async def search_passages(
    session: AsyncSession, search: PassageSearch, tuning: SearchTuning = DEFAULT_TUNING
) -> list[PassageHit]:
    """The search's hits, best first, run under this transaction's vector search settings (set in
    the round trip that gets the query's lexemes when hybrid), then both rankings' candidates (or the
    nearest alone): exactly in one statement, or through the HNSW index when the archives are big
    enough for it to pay; a hybrid search then reads the rows of the candidates it kept."""
    hybrid = tuning.archival_hybrid and search.query_vector is not None and bool(search.query.strip())
    candidates = max(CANDIDATES, 2 * search.top_k) if hybrid else search.top_k
    with metrics.timed(metrics.SEARCH_SECONDS, "archival"):
        lexemes, indexed = await prepare(session, search, candidates, hybrid=hybrid)
        if indexed:
            rows = await _through_the_index(session, search, lexemes, candidates)
        else:
            exact = search.statement(indexed=False) if lexemes is None else search.hybrid_statement(len(lexemes))
            rows = list(await direct.run(session, exact, search.parameters(candidates, lexemes or ())))
        if hybrid:
            rows = await _chosen(
                session, search, rank_hybrid(rows, candidates=candidates, limit=search.top_k, rrf_k=tuning.rrf_k)
            )
    return [PassageHit(row, float(row.distance)) for row in rows]


async def prepare(
    session: AsyncSession, search: PassageSearch, candidates: int, *, hybrid: bool = False
) -> tuple[list[str] | None, bool]:
    """This transaction's vector search settings, and a `hybrid` search's query lexemes (else None);
    and whether the search should walk the HNSW index for its `candidates` nearest. Without tag or
    date filters all in one round trip (the archives' kept counts decide); with them the count of the
    passages they admit follows, planned without sequential scans. When the index pays, the
    transaction's next plan is made without sorts: the next statement must be the walk."""
    preparation = search.preparation(hybrid)
    parameters: dict[str, Any] = vector_search_parameters(candidates)
    if hybrid:
        parameters["query"] = search.query
    if preparation.decides:
        parameters.update(search.filter_parameters(candidates))
    row = (await direct.run(session, preparation.statement, parameters)).one()
    lexemes = list(row.lexemes) if hybrid else None
    if preparation.decides:
        return lexemes, bool(row.pays)
    counted = search.index_pays_statement() if search.query_vector is not None else None
    pays = counted is not None and bool((await direct.run(session, counted, search.filter_parameters(candidates))).scalar())
    return lexemes, pays


async def _through_the_index(
    session: AsyncSession, search: PassageSearch, lexemes: Sequence[str] | None, candidates: int
) -> list[Any]:
    """The nearest through the HNSW index (planned without sorts, it turns them back on), then a hybrid
    search's full-text candidates in a statement planned with them, where the GIN index needs a sort."""
    nearest_parameters = search.parameters(candidates)
    rows = list(await direct.run(session, _nearest_of(search, lexemes, indexed=True), nearest_parameters))
    if len(rows) < candidates:
        # The index scan stopped (hnsw.max_scan_tuples) before the filters admitted enough passages,
        # or fewer match: the exact search finds every match.
        rows = list(await direct.run(session, _nearest_of(search, lexemes, indexed=False), nearest_parameters))
    if lexemes:
        rows.extend(
            await direct.run(session, search.lexeme_statement(len(lexemes)), search.lexeme_parameters(candidates, lexemes))
        )
    return rows


def _nearest_of(search: PassageSearch, lexemes: Sequence[str] | None, *, indexed: bool) -> Direct:
    return search.statement(indexed=indexed) if lexemes is None else search.nearest_statement(indexed=indexed)


def rank_hybrid(rows: Sequence[Any], *, candidates: int, limit: int, rrf_k: int) -> list[str]:
    """The candidates' ids fused, best first: full-text matches ranked by term rarity (search.lexical;
    newer wins a tie), the vector ones by exact distance (relaxed_order can return neighbours slightly
    out of order). One pass over the rows: a row's attribute costs about 0.4 µs, and a search reads
    up to 250 rows."""
    matches: list[TermMatch] = []
    nearest: list[tuple[float, str]] = []
    for row in rows:
        passage_id, term = row.id, row.term
        if term == VECTOR_BRANCH:
            nearest.append((row.distance, passage_id))
        else:
            matches.append(TermMatch(term, passage_id, recency_of(row.created_at)))
    fts_ids = rank_by_term_rarity(matches, window=candidates, limit=candidates)
    nearest.sort(key=lambda pair: pair[0])
    fused = reciprocal_rank_fusion(fts_ids, [passage_id for _, passage_id in nearest], limit=limit, k=rrf_k)
    return [f.id for f in fused]


async def _chosen(session: AsyncSession, search: PassageSearch, ids: Sequence[str]) -> list[Any]:
    """The rows of the passages `ids`, in that order. A passage deleted since the candidates were read
    (each statement reads the database as it is then, READ COMMITTED) is left out, as it would be had
    the deletion come first."""
    if not ids:
        return []
    found = {row.id: row for row in await direct.run(session, search.chosen_statement(), search.chosen_parameters(ids))}
    return [found[passage_id] for passage_id in ids if passage_id in found]


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

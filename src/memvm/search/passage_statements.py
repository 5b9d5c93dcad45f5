"""The SQL of an archival search (search/passages.py), built once per shape of search: every value a
named parameter, every statement sent directly (db/direct.py), each naming its organization where it
reads the passage and archive tables, which direct.run fills in from the session."""

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    Integer,
    Select,
    String,
    any_,
    bindparam,
    cast,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY

from memvm.db import direct
from memvm.db.direct import Direct
from memvm.orm import Archive, Passage
from memvm.orm.vector_type import Float4Vector
from memvm.search.conversation import VECTOR_BRANCH, lexeme_array
from memvm.search.vector_index import VECTOR_SEARCH_SETTINGS, index_pays_statement, same_model, sorts_back_on

# What a search result needs (never the vector: parsing 384+ floats per row is not free). The rows
# come from the driver (db/direct.py), so the metadata keeps its attribute's name by a label.
RESULT_COLUMNS = (
    Passage.id,
    Passage.archive_id,
    Passage.text,
    Passage.tags,
    Passage.metadata_.label("metadata_"),
    Passage.embedding_model,
    Passage.embedding_dim,
    Passage.writer_id,
    Passage.created_at,
)
# What a hybrid search's candidates carry to its ranking (search/passages.py): up to 50 per query
# lexeme and 50 nearest, of which top_k are kept; the kept ones' RESULT_COLUMNS and distance come
# from `chosen`. With every candidate's text and metadata, and every full-text match's vector (6 kB,
# out of line, at 1536-d) read for its distance, the words' statement of a search in 1,000 passages
# took 2.6-7.9 ms of PostgreSQL's time; 1.2-2.1 ms without (bench/README.md, "Hybrid candidates by id").
CANDIDATE_COLUMNS = (Passage.id, Passage.created_at)


@dataclass(frozen=True)
class Shape:
    """What the SQL text of a search depends on. Each shape's statements are built once (below), with
    every value a named parameter (building the hybrid SELECT took 5-7 ms of CPU per search), and are
    sent directly (db/direct.py: each names its organization, which direct.run fills in)."""

    dim: int
    vector: bool  # with a query vector (else the newest passages, distance 0)
    tags: str  # "any", "all" or "" (no tag filter)
    start: bool
    end: bool


# Every branch's LIMIT (top_k for a vector-only search, each ranking's candidates for a hybrid one),
# and the index_pays count's candidates.
_LIMIT = bindparam("limit", type_=Integer)
# An array, not an IN list: a direct statement's parameters are sent as they are.
_ARCHIVE_IDS = bindparam("archive_ids", type_=ARRAY(String))
_ORGANIZATION = bindparam(direct.ORGANIZATION, type_=String)
_IDS = bindparam("ids", type_=ARRAY(String))
# Enough for the shapes a deployment uses (a few dimensions × filters × lexeme counts); past it, rebuilt.
_SHAPES = 256


@lru_cache(maxsize=_SHAPES)
def vector_only(shape: Shape, indexed: bool) -> Direct:
    # relaxed_order can return neighbours slightly out of order: re-sort the materialized top_k.
    nearest = select(_nearest(shape, indexed).cte("nearest").prefix_with("MATERIALIZED"))
    ranked = _selected_from(sorts_back_on(nearest) if indexed else nearest)
    return Direct(ranked.order_by(ranked.selected_columns.distance, ranked.selected_columns.created_at.desc()))


@lru_cache(maxsize=_SHAPES)
def hybrid(shape: Shape, lexemes: int) -> Direct:
    return Direct(_selected_from(union_all(_vector_branch(shape, indexed=False), *_lexeme_branches(shape, lexemes))))


@lru_cache(maxsize=_SHAPES)
def nearest_candidates(shape: Shape, indexed: bool) -> Direct:
    branch = _vector_branch(shape, indexed)
    return Direct(_selected_from(sorts_back_on(branch)) if indexed else branch)


@lru_cache(maxsize=_SHAPES)
def lexeme_candidates(shape: Shape, lexemes: int) -> Direct:
    return Direct(_selected_from(union_all(*_lexeme_branches(shape, lexemes))))


def _vector_branch(shape: Shape, indexed: bool) -> Select[*tuple[Any, ...]]:
    return _nearest(shape, indexed, CANDIDATE_COLUMNS).add_columns(literal(VECTOR_BRANCH).label("term"))


def _lexeme_branches(shape: Shape, lexemes: int) -> list[Select[*tuple[Any, ...]]]:
    return [_newest_containing(shape, term).add_columns(literal(term).label("term")) for term in range(lexemes)]


def _selected_from(rows: Any) -> Select[*tuple[Any, ...]]:
    """Selected from, not run bare: rows keep RESULT_COLUMNS' attribute names (metadata_)."""
    return select(rows.subquery("candidate"))


@lru_cache(maxsize=_SHAPES)
def chosen(shape: Shape) -> Direct:
    """The passages a hybrid search kept (`ids`, its `chosen_parameters`): RESULT_COLUMNS and `distance`."""
    by_id = Passage.organization_id == _ORGANIZATION, Passage.id == any_(_IDS)
    return Direct(select(*RESULT_COLUMNS, _distance(shape)).where(*by_id))


@lru_cache(maxsize=_SHAPES)
def index_pays(shape: Shape) -> Direct | None:
    statement = _index_pays_select(shape)
    return None if statement is None else Direct(statement)


def _index_pays_select(shape: Shape) -> Select[*tuple[Any, ...]] | None:
    if _counts_passages(shape):
        scope: Any = select(Passage.id).where(Passage.organization_id == _ORGANIZATION, *_conditions(shape, Passage))
    else:  # kept by every write of their passages (archives/repository.py): no passage is read
        kept = select(func.coalesce(func.sum(Archive.passage_count), 0))
        scope = kept.where(Archive.organization_id == _ORGANIZATION, Archive.id == any_(_ARCHIVE_IDS)).scalar_subquery()
    return index_pays_statement(scope, Passage.__tablename__, shape.dim, _LIMIT)


def _counts_passages(shape: Shape) -> bool:
    """Whether index_pays counts the passages the filters admit (else the archives' kept counts say it)."""
    return bool(shape.tags or shape.start or shape.end)


@dataclass(frozen=True)
class Preparation:
    """A search transaction's first statement: the vector search settings (VECTOR_SEARCH_SETTINGS), a
    hybrid search's query lexemes (`lexemes`), and whether the index pays (`pays`) when that needs no
    plan made under the settings (the count of filtered passages does: without sequential scans)."""

    statement: Direct
    decides: bool


@lru_cache(maxsize=_SHAPES)
def preparation(shape: Shape, hybrid: bool) -> Preparation:
    extra = [lexeme_array().label("lexemes")] if hybrid else []
    decision = None if _counts_passages(shape) or not shape.vector else _index_pays_select(shape)
    if decision is None:
        return Preparation(Direct(select(*VECTOR_SEARCH_SETTINGS, *extra), tenant=False), decides=False)
    return Preparation(Direct(decision.add_columns(*VECTOR_SEARCH_SETTINGS, *extra)), decides=True)


def lexeme_name(term: int) -> str:
    return f"lexeme_{term}"


def _newest_containing(shape: Shape, term: int) -> Select[*tuple[Any, ...]]:
    """The newest filtered passages whose text has the lexeme numbered `term` (no distance: a common
    word matches thousands of passages, and the ranking reads only which ones and how new)."""
    lexeme = bindparam(lexeme_name(term), type_=String)
    return (
        select(*CANDIDATE_COLUMNS, cast(null(), Float).label("distance"))
        .where(_same_model(shape), *_conditions(shape, Passage))
        .where(Passage.fts.op("@@")(cast(func.quote_literal(lexeme), TSQUERY)))
        .order_by(Passage.created_at.desc())
        .limit(_LIMIT)
    )


def _distance(shape: Shape) -> Any:
    """`distance`: the cosine distance of the passage's vector to the query vector, cast to the
    dimension the partial HNSW index is on; 0 without a query vector."""
    if not shape.vector:
        return literal(0.0).label("distance")
    return cast(Passage.embedding, Float4Vector(shape.dim)).cosine_distance(_query_vector(shape)).label("distance")


def _query_vector(shape: Shape) -> BindParameter[Any]:
    """The query vector, one parameter however many branches compare with it (same name, same `$n`)."""
    return bindparam("query_vector", type_=Float4Vector(shape.dim))


def _nearest(shape: Shape, indexed: bool, columns: tuple[Any, ...] = RESULT_COLUMNS) -> Select[*tuple[Any, ...]]:
    """`columns` and `distance` of the nearest filtered passages (newest first without a query
    vector), by a plan the caller chose, since the planner misjudges both: it prices reading and
    comparing a vector like any column, so it sorts 10,000 passages of 1536-d exactly (50 ms) where
    the index takes 3, and it may walk the index for an archive that is a sliver of it (hundreds of ms)."""
    if not shape.vector:
        return _filtered(shape, columns, _distance(shape)).order_by(Passage.created_at.desc()).limit(_LIMIT)
    if not indexed:
        # the bare column: no index matches this order, so the planner sorts the filtered rows exactly
        exact = Passage.embedding.cosine_distance(_query_vector(shape))
        return _filtered(shape, columns, exact.label("distance")).order_by(exact).limit(_LIMIT)
    # All passages of the model in the index's order; OFFSET 0 keeps the filters out of this subquery
    # (no bitmap scan + sort can replace the index walk), and the iterative scan streams rows to the
    # filters until `limit` pass. No ORDER BY outside: it would make the scan read the whole index.
    distance = _distance(shape)
    ranked = select(*RESULT_COLUMNS, distance).where(_same_model(shape)).order_by(distance).offset(0).subquery("ranked")
    selected = [ranked.c[column.key] for column in (*columns, distance)]
    return select(*selected).where(*_conditions(shape, ranked.c)).limit(_LIMIT)


def _filtered(shape: Shape, columns: tuple[Any, ...], distance: Any) -> Select[*tuple[Any, ...]]:
    """`columns` and `distance` of the passages every filter admits."""
    return select(*columns, distance).where(_same_model(shape), *_conditions(shape, Passage))


def _same_model(shape: Shape) -> ColumnElement[bool]:
    """The organization's passages of the search's model: where every statement of a search reads the
    passage table (inside the index walk's fence too, as the session's tenancy criteria were)."""
    model = same_model(Passage.embedding_model, Passage.embedding_dim, bindparam("model", type_=String), shape.dim)
    return (Passage.organization_id == _ORGANIZATION) & model


def _conditions(shape: Shape, columns: Any) -> list[ColumnElement[bool]]:
    """The archive, tag and date filters on `columns` (Passage itself, or a subquery's columns)."""
    conditions = [columns.archive_id == any_(_ARCHIVE_IDS)]
    if shape.tags:
        tags = bindparam("tags", type_=Passage.tags.type)
        conditions.append(columns.tags.contains(tags) if shape.tags == "all" else columns.tags.overlap(tags))
    if shape.start:
        conditions.append(columns.created_at >= bindparam("start", type_=Passage.created_at.type))
    if shape.end:
        conditions.append(columns.created_at <= bindparam("end", type_=Passage.created_at.type))
    return conditions

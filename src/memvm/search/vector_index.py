"""What every vector search sets up (passages, messages, tools): this transaction's HNSW settings, the
embedding model filter in a form the partial HNSW indexes can be proven from, and whether a filtered
search should walk the HNSW index at all."""

from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    ScalarSelect,
    Select,
    String,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    literal_column,
    null,
    select,
    table,
    union_all,
)
from sqlalchemy.dialects.postgresql import BIGINT, REGCLASS
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import QueryableAttribute

from memvm.orm.vector_index import INDEXED_DIMENSIONS, hnsw_index_name

# ef_search 100, not pgvector's 40: recall@10 at 100k passages was 0.80-0.94 at 40 and 0.93-0.99 at 100
# for about 2-3 ms more SQL (bench/README.md).
DEFAULT_EF_SEARCH = 100


async def prefer_vector_index(session: AsyncSession, top_k: int) -> None:
    """Settings for this transaction's vector search, in one round trip (VECTOR_SEARCH_SETTINGS)."""
    await session.execute(_PREFER_VECTOR_INDEX, vector_search_parameters(top_k))


def _set_local(name: str, value: str | ColumnElement[str]) -> ColumnElement[Any]:
    """set_config(name, value) for this transaction. The name is SQL text, so a statement's text
    says which settings it makes (logs, and the bench's profile, which reruns them: bench/search)."""
    return func.set_config(literal_column(f"'{name}'"), value, literal_column("true"))


# Columns that set this transaction's vector search up, for a statement of their own
# (prefer_vector_index) or of one the search sends anyway (a round trip less); built once, with
# ef_search a parameter (vector_search_parameters):
# - ef_search at least 100 and 2 × top_k (HNSW returns at most ef_search rows per scan pass);
# - iterative scans: when filters drop candidates the scan goes on, so top_k is still met;
# - no sequential scans: pgvector's cost model makes reading every row look cheaper than the HNSW
#   index for tables of a few thousand rows at this ef_search (at 3,000 passages: 4-6 ms instead
#   of 0.3-0.6 ms); selective filters still get their own indexes (tags, archive, agent) + exact sort.
VECTOR_SEARCH_SETTINGS = (
    _set_local("hnsw.ef_search", bindparam("ef_search", type_=String)),
    _set_local("hnsw.iterative_scan", "relaxed_order"),
    _set_local("enable_seqscan", "off"),
)
_PREFER_VECTOR_INDEX = select(*VECTOR_SEARCH_SETTINGS)


def vector_search_parameters(top_k: int) -> dict[str, str]:
    """The values of VECTOR_SEARCH_SETTINGS for a search of `top_k`."""
    return {"ef_search": str(max(DEFAULT_EF_SEARCH, 2 * top_k))}


def same_model(
    model_column: QueryableAttribute[Any], dim_column: QueryableAttribute[Any], model: str | ColumnElement[str], dim: int
) -> ColumnElement[bool]:
    """The dimension goes into the SQL text, not a parameter: a generic prepared plan can then still
    prove the partial HNSW index's `embedding_dim = <dim>` predicate."""
    return (model_column == model) & (dim_column == literal_column(str(int(dim))))


# An exact search reads the vector of every row its filters admit: ~2,000 rows of 384-d or 500 of 1536-d
# cost about what an HNSW search costs (2-3 ms; bench/README.md, "Archival search at any size").
EXACT_SCAN_FLOATS = 768_000
# A filtered HNSW scan visits about candidates / (share of the index's rows the filters admit) tuples;
# past ~1,000 visits (a scope of 5 % of the index for 50 candidates) the exact search is cheaper.
INDEX_VISITS = 1_000
_PG_CLASS = table("pg_class", column("oid"), column("reltuples"))


def index_pays_statement(
    scope: Select[Any] | ScalarSelect[Any], table_name: str, dim: int, candidates: int | ColumnElement[int]
) -> Select[Any] | None:
    """One boolean: are the rows of `scope` (the rows the search's filters admit) enough for
    the HNSW index to beat an exact scan? Enough means at least EXACT_SCAN_FLOATS / dim rows, and a share
    of the index large enough that `candidates` are found within INDEX_VISITS visits. The rows are
    counted with a LIMIT, or `scope` is their number where it is kept (a scalar subquery): with
    sequential scans off the planner may count through a bitmap scan, which reads every entry of the
    scope before the LIMIT applies (8 ms for an archive of 83k passages, issue 30). The index's size is
    the planner's own estimate (pg_class). None when no index covers `dim` (the search is exact anyway).

    When the index pays, the statement also turns sorts off for this transaction's next plan: the
    organization's filter (db/tenancy.py) lets the planner read every passage of the organization by
    its primary key and sort them by distance, which it prices below the index walk because it does
    not price reading a vector. With sorts off the walk is the one plan without a sort; the statement
    that walks the index turns them back on (`sorts_back_on`)."""
    if dim not in INDEXED_DIMENSIONS:
        return None
    index_rows = func.greatest(_PG_CLASS.c.reltuples, 0)
    needed = (
        select(func.greatest(EXACT_SCAN_FLOATS // dim, func.ceil(index_rows * candidates / INDEX_VISITS)).cast(BIGINT))
        .where(_PG_CLASS.c.oid == cast(literal(hnsw_index_name(table_name, dim)), REGCLASS))
        .scalar_subquery()
    )
    if isinstance(scope, ScalarSelect):
        size: ScalarSelect[Any] = scope
    else:
        counted = scope.with_only_columns(literal(1)).limit(needed).subquery("scope")
        size = select(func.count()).select_from(counted).scalar_subquery()
    decision = select((size >= needed).label("pays")).subquery("decision")
    return select(decision.c.pays, _set_local("enable_sort", case((decision.c.pays, "off"), else_="on")))


def sorts_back_on(statement: Select[Any]) -> CompoundSelect[Any]:
    """`statement` (planned while index_pays_statement had sorts off), then sorts on again for the
    transaction: a branch of no row whose one-time filter sets them, run once after the statement's rows."""
    nothing = [cast(null(), selected.type).label(selected.key) for selected in statement.selected_columns]
    return union_all(statement, select(*nothing).where(_set_local("enable_sort", "on").is_(None)))

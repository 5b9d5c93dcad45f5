"""What every vector search sets up (passages, messages, tools): this transaction's HNSW settings, and
the embedding model filter in a form the partial HNSW indexes can be proven from."""

from typing import Any

from sqlalchemy import ColumnElement, literal_column, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import QueryableAttribute

# ef_search 100, not pgvector's 40: recall@10 at 100k passages was 0.80-0.94 at 40 and 0.93-0.99 at 100
# for about 2-3 ms more SQL (bench/README.md).
DEFAULT_EF_SEARCH = 100
SEARCH_SETTINGS_SQL = (
    "SELECT set_config('hnsw.ef_search', :ef, true), set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('enable_seqscan', 'off', true)"
)


async def prefer_vector_index(session: AsyncSession, top_k: int) -> None:
    """Settings for this transaction's vector search, in one round trip:
    - ef_search at least 100 and 2 × top_k (HNSW returns at most ef_search rows per scan pass);
    - iterative scans: when filters drop candidates the scan goes on, so top_k is still met;
    - no sequential scans: pgvector's cost model makes reading every row look cheaper than the HNSW
      index for tables of a few thousand rows at this ef_search (at 3,000 passages: 4-6 ms instead
      of 0.3-0.6 ms); selective filters still get their own indexes (tags, archive, agent) + exact sort."""
    await session.execute(text(SEARCH_SETTINGS_SQL), {"ef": str(max(DEFAULT_EF_SEARCH, 2 * top_k))})


def same_model(
    model_column: QueryableAttribute[Any], dim_column: QueryableAttribute[Any], model: str, dim: int
) -> ColumnElement[bool]:
    """The dimension goes into the SQL text, not a parameter: a generic prepared plan can then still
    prove the partial HNSW index's `embedding_dim = <dim>` predicate."""
    return (model_column == model) & (dim_column == literal_column(str(int(dim))))

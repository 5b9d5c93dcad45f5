"""HNSW indexes over a dimension-less `vector` column: one partial expression index per common
dimension, so vectors of any model can share a table and every model dimension listed here is
searched through an index (others fall back to an exact scan)."""

from sqlalchemy import Index, text

INDEXED_DIMENSIONS = (384, 768, 1024, 1536)


def hnsw_index_name(table: str, dim: int) -> str:
    return f"ix_{table}_embedding_{dim}"


def hnsw_indexes(table: str) -> tuple[Index, ...]:
    return tuple(
        Index(
            hnsw_index_name(table, dim),
            text(f"(embedding::vector({dim})) vector_cosine_ops"),
            postgresql_using="hnsw",
            postgresql_where=text(f"embedding_dim = {dim}"),
        )
        for dim in INDEXED_DIMENSIONS
    )

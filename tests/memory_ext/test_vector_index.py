"""The planner uses the HNSW index for archival search, and filtered search still fills top_k."""

import random

from memvm.ids import new_id
from memvm.search.archival import SEARCH_SETTINGS_SQL


def unit_vector(rng, dim=384):
    values = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(v * v for v in values) ** 0.5
    return "[" + ",".join(f"{v / norm:.5f}" for v in values) + "]"


async def seed(db, count, rare_every):
    rng = random.Random(7)
    archive_id = new_id("archive")
    await db.execute("INSERT INTO archive (id, name, embedding_model, embedding_dim, metadata) VALUES ($1, 'a', 'local/all-MiniLM-L6-v2', 384, '{}')", archive_id)
    rows = [(new_id("passage"), archive_id, f"p{n}", unit_vector(rng), ["rare"] if n % rare_every == 0 else ["common"]) for n in range(count)]
    await db.executemany(
        "INSERT INTO passage (id, archive_id, text, embedding, embedding_model, embedding_dim, tags, metadata, writer_type)"
        " VALUES ($1, $2, $3, $4::vector, 'local/all-MiniLM-L6-v2', 384, $5, '{}', 'api')", rows)
    await db.execute("ANALYZE passage")
    return archive_id, unit_vector(rng)


QUERY = """
    SELECT id FROM passage
    WHERE archive_id = $1 AND embedding_dim = 384 AND embedding_model = 'local/all-MiniLM-L6-v2' {extra}
    ORDER BY embedding::vector(384) <=> $2::vector LIMIT 10
"""


async def test_search_plan_uses_the_hnsw_index_and_filters_keep_top_k(db):
    archive_id, query = await seed(db, 3000, rare_every=60)
    async with db.transaction():
        # the server's settings for a search transaction (ef_search 100: without the seq-scan penalty
        # the planner would read all 3,000 rows here)
        await db.execute(SEARCH_SETTINGS_SQL.replace(":ef", "'100'"))
        plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + QUERY.format(extra=""), archive_id, query))
        filtered = await db.fetch(QUERY.format(extra="AND tags && ARRAY['rare']"), archive_id, query)

    assert "ix_passage_embedding_384" in plan, plan
    assert len(filtered) == 10  # 50 rare passages exist; the iterative scan keeps going until 10 pass the filter

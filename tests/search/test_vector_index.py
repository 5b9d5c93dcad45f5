"""The planner uses the HNSW index for the archival search the server runs, and filtered search still fills top_k."""

import random

from sqlalchemy import Executable
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ClauseElement

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.ids import new_id
from memvm.search.passages import PassageSearch, index_pays, search_passages
from memvm.search.vector_index import prefer_vector_index

MODEL = "local/all-MiniLM-L6-v2"
DIM = 384


class Explain(Executable, ClauseElement):
    """EXPLAIN of a statement, compiled by the session's dialect: its parameters are bound as when the server runs it."""

    inherit_cache = False

    def __init__(self, statement: Executable) -> None:
        self.statement = statement


@compiles(Explain)
def _explain_sql(explain: Explain, compiler, **kw) -> str:
    return "EXPLAIN " + compiler.process(explain.statement, **kw)


def unit_vector(rng: random.Random) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in values) ** 0.5
    return [round(v / norm, 5) for v in values]


async def insert_archive(db, model: str = MODEL, dim: int = DIM) -> str:
    """A new archive of `model` in the default organization; its id."""
    archive_id = new_id("archive")
    await db.execute(
        "INSERT INTO archive (id, name, embedding_model, embedding_dim, metadata, organization_id)"
        " VALUES ($1, 'a', $2, $3, '{}', $4)",
        archive_id,
        model,
        dim,
        DEFAULT_ORGANIZATION_ID,
    )
    return archive_id


async def seed(db, count, rare_every):
    rng = random.Random(7)
    archive_id = await insert_archive(db)
    rows = []
    for n in range(count):
        tags = ["rare"] if n % rare_every == 0 else ["common"]
        rows.append((new_id("passage"), archive_id, f"p{n}", str(unit_vector(rng)), MODEL, DIM, tags, DEFAULT_ORGANIZATION_ID))
    await db.executemany(
        "INSERT INTO passage (id, archive_id, text, embedding, embedding_model, embedding_dim, tags, metadata, writer_type,"
        " organization_id) VALUES ($1, $2, $3, $4::vector, $5, $6, $7, '{}', 'api', $8)",
        rows,
    )
    await db.execute("ANALYZE passage")
    return archive_id, unit_vector(rng)


async def test_search_plan_uses_the_hnsw_index_and_filters_keep_top_k(db, sessionmaker):
    archive_id, query_vector = await seed(db, 3000, rare_every=60)
    search = {"archive_ids": [archive_id], "model": MODEL, "dim": DIM, "query_vector": query_vector, "top_k": 10}
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        # the server's settings for a search transaction, which search_passages applies itself (without the
        # seq-scan penalty the planner would read all 3,000 rows here)
        await prefer_vector_index(session, search["top_k"])
        indexed = await index_pays(session, PassageSearch(**search), search["top_k"])
        plan = "\n".join((await session.execute(Explain(PassageSearch(**search).statement(indexed=indexed)))).scalars())
        filtered = await search_passages(session, PassageSearch(**search, tags=["rare"]))

    assert "ix_passage_embedding_384" in plan, plan
    assert len(filtered) == 10  # 50 rare passages exist; the iterative scan keeps going until 10 pass the filter

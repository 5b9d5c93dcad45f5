"""The planner uses the HNSW index for the archival search the server runs, filtered search still fills
top_k, and an index scan that ends with too few is made up for by the exact search."""

import random

from sqlalchemy import Executable, text
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ClauseElement

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db import direct
from memvm.db.direct import Direct
from memvm.db.uow import transaction
from memvm.ids import new_id
from memvm.search.passages import PassageSearch, prepare, search_passages

MODEL = "local/all-MiniLM-L6-v2"
DIM = 384


class Explain(Executable, ClauseElement):
    """EXPLAIN of a search's statement (a direct one, db/direct.py: it names its organization itself)."""

    inherit_cache = False

    def __init__(self, statement: Executable, *, analyze: bool = False) -> None:
        self.statement = statement
        self.analyze = analyze


@compiles(Explain)
def _explain_sql(explain: Explain, compiler, **kw) -> str:
    return ("EXPLAIN ANALYZE " if explain.analyze else "EXPLAIN ") + compiler.process(explain.statement, **kw)


async def plan_of(session, statement: Direct, parameters: dict, *, analyze: bool = False) -> str:
    """The plan of `statement` as the server runs it: in the session's organization and transaction,
    its parameters bound as the search binds them."""
    explained = Direct(Explain(statement.statement, analyze=analyze))
    return "\n".join((await direct.run(session, explained, parameters)).scalars())


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


def near(center: list[float], rng: random.Random) -> list[float]:
    """A vector close to `center` (cosine about 0.96 at 384-d)."""
    values = [c + 0.3 * n for c, n in zip(center, unit_vector(rng), strict=True)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


async def seed(db, count, rare_every):
    rng = random.Random(7)
    passages = [(unit_vector(rng), ["rare"] if n % rare_every == 0 else ["common"]) for n in range(count)]
    return await insert_passages(db, passages), unit_vector(rng)


async def insert_passages(db, passages: list[tuple[list[float], list[str]]]) -> str:
    """A new archive of these passages (vector, tags); its id."""
    archive_id = await insert_archive(db)
    rows = [
        (new_id("passage"), archive_id, f"p{n}", str(vector), MODEL, DIM, tags, DEFAULT_ORGANIZATION_ID)
        for n, (vector, tags) in enumerate(passages)
    ]
    await db.executemany(
        "INSERT INTO passage (id, archive_id, text, embedding, embedding_model, embedding_dim, tags, metadata, writer_type,"
        " organization_id) VALUES ($1, $2, $3, $4::vector, $5, $6, $7, '{}', 'api', $8)",
        rows,
    )
    await keep_counts(db, archive_id)
    return archive_id


async def keep_counts(db, archive_id: str) -> None:
    """What the server keeps with every write of passages (archives/repository.py), after passages
    written around it: the archive's passage count, which an unfiltered search reads to pick its plan;
    then the planner's statistics."""
    await db.execute(
        "UPDATE archive SET passage_count = (SELECT count(*) FROM passage WHERE archive_id = $1) WHERE id = $1",
        archive_id,
    )
    await db.execute("ANALYZE passage")


async def test_search_plan_uses_the_hnsw_index_and_filters_keep_top_k(db, sessionmaker):
    archive_id, query_vector = await seed(db, 3000, rare_every=60)
    search = {"archive_ids": [archive_id], "model": MODEL, "dim": DIM, "query_vector": query_vector, "top_k": 10}
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        # the server's settings for a search transaction, which search_passages applies itself (without the
        # seq-scan penalty the planner would read all 3,000 rows here)
        _, indexed = await prepare(session, PassageSearch(**search), search["top_k"])
        plan = await plan_of(session, PassageSearch(**search).statement(indexed=indexed), PassageSearch(**search).parameters(10))
        filtered = await search_passages(session, PassageSearch(**search, tags=["rare"]))

    assert "ix_passage_embedding_384" in plan, plan
    assert len(filtered) == 10  # 50 rare passages exist; the iterative scan keeps going until 10 pass the filter


async def test_an_index_scan_that_ends_with_too_few_is_made_up_for_by_the_exact_search(db, sessionmaker):
    rng = random.Random(30)
    query_vector = unit_vector(rng)
    opposite = [-v for v in query_vector]
    # Two thirds tagged 'far', together opposite the query; the rest random. Enough tagged passages for
    # the index to pay, but an index scan from the query reaches them last.
    archive_id = await insert_passages(
        db, [(near(opposite, rng), ["far"]) if n % 3 else (unit_vector(rng), []) for n in range(3000)]
    )
    far = PassageSearch(archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=query_vector, top_k=10, tags=["far"])
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        # The scan's tuple budget spent before it gets there, as in an archive too large to walk.
        await session.execute(text("SET LOCAL hnsw.max_scan_tuples = 1"))
        found = await search_passages(session, far)
        assert (await prepare(session, far, far.top_k))[1]  # the search took the index first
        through_index = list(await direct.run(session, far.statement(indexed=True), far.parameters(far.top_k)))
        await session.execute(text("SET LOCAL enable_indexscan = off"))
        exact = list(await direct.run(session, far.statement(indexed=False), far.parameters(far.top_k)))

    assert len(through_index) < 10
    assert [hit.passage.id for hit in found] == [row.id for row in exact]
    assert len(found) == 10

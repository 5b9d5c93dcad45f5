"""Archival search at 1536-d picks its plan by how many passages its filters admit: the HNSW index when
they are enough for it to pay (the planner alone sorted them exactly, issue 30), an exact sort for a
few; through the index, a tag filter still gets the exact top_k."""

import random

from sqlalchemy import false, literal, select, text

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db import direct
from memvm.db.uow import transaction
from memvm.ids import new_id
from memvm.search.passages import PassageSearch, prepare, search_passages
from memvm.search.vector_index import sorts_back_on
from tests.search.test_vector_index import insert_archive, keep_counts, plan_of

MODEL = "openai/text-embedding-3-small"
DIM = 1536


def unit_vector(rng: random.Random) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in values) ** 0.5
    return [round(v / norm, 5) for v in values]


QUERY = unit_vector(random.Random(1))


def away_from_query(rng: random.Random) -> list[float]:
    """A random vector pushed away from the query (cosine about -0.3, where random ones are about 0):
    among the last an index scan from the query reaches, yet not clustered (the graph stays connected)."""
    noise = unit_vector(rng)
    values = [n - 0.3 * q for q, n in zip(QUERY, noise, strict=True)]
    norm = sum(v * v for v in values) ** 0.5
    return [round(v / norm, 5) for v in values]


async def seed(db, count: int) -> str:
    """An archive of `count` 1536-d passages: every third tagged 'third' and far from QUERY, the
    others random; every 100th also tagged 'rare'. Its id."""
    rng = random.Random(30)
    archive_id = await insert_archive(db, MODEL, DIM)
    rows = [
        (
            new_id("passage"),
            archive_id,
            f"p{n}",
            str(away_from_query(rng) if n % 3 == 0 else unit_vector(rng)),
            ["third"] * (n % 3 == 0) + ["rare"] * (n % 100 == 0),
        )
        for n in range(count)
    ]
    # built after the rows, not row by row: inserting 1536-d rows one by one into HNSW takes seconds
    index = await db.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_passage_embedding_1536'")
    await db.execute("DROP INDEX ix_passage_embedding_1536")
    await db.executemany(
        "INSERT INTO passage (id, archive_id, text, embedding, embedding_model, embedding_dim, tags, metadata,"
        f" writer_type, organization_id) VALUES ($1, $2, $3, $4::vector, '{MODEL}', {DIM}, $5, '{{}}', 'api',"
        f" '{DEFAULT_ORGANIZATION_ID}')",
        rows,
    )
    await db.execute(index)
    await keep_counts(db, archive_id)
    return archive_id


def search_of(archive_id: str, top_k: int = 10, **filters) -> PassageSearch:
    return PassageSearch(archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=QUERY, top_k=top_k, **filters)


async def planned(session, search: PassageSearch) -> str:
    """EXPLAIN of the statement search_passages runs for a vector-only search."""
    _, indexed = await prepare(session, search, search.top_k)
    return await plan_of(session, search.statement(indexed=indexed), search.parameters(search.top_k))


async def test_the_plan_follows_the_filtered_size_and_a_filtered_index_scan_keeps_the_exact_top_k(db, sessionmaker):
    archive_id = await seed(db, 1530)
    third = search_of(archive_id, top_k=50, tags=["third"])
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        whole = await planned(session, search_of(archive_id))
        rare = await planned(session, search_of(archive_id, tags=["rare"]))
        third_plan = await planned(session, third)
        # 510 passages tagged 'third' pay for the index, but they are the farthest from the query: the
        # index scan must go on well past its first ef_search (100) passages to fill top_k
        found = await search_passages(session, third)
        await session.execute(text("SET LOCAL enable_indexscan = off"))
        exact = list(await direct.run(session, third.statement(indexed=False), third.parameters(third.top_k)))

    assert "ix_passage_embedding_1536" in whole, whole
    assert "ix_passage_embedding_1536" not in rare, rare  # 16 passages: reading them beats the index
    assert "ix_passage_embedding_1536" in third_plan, third_plan
    assert [hit.passage.id for hit in found] == [row.id for row in exact]
    assert len(found) == 50


async def index_walks_and_sorts(session) -> tuple[int, str]:
    """How often this transaction walked the 1536-d HNSW index, and whether sorts are on now."""
    row = (
        await session.execute(
            text("SELECT pg_stat_get_xact_numscans('ix_passage_embedding_1536'::regclass), current_setting('enable_sort')")
        )
    ).one()
    return row[0], row[1]


async def test_a_search_over_its_whole_organization_walks_the_index_and_leaves_sorts_on(db, sessionmaker):
    # The archive is all of its organization's passages: the organization's filter alone let the planner
    # read them all by the primary key and sort them (issue 30's 1,000-passage bench, 8 of 9 ms of SQL).
    archive_id = await seed(db, 1530)
    for search in (search_of(archive_id), search_of(archive_id, query="p7 p10 p13")):
        async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            found = await search_passages(session, search)
            walks, sorts = await index_walks_and_sorts(session)
            await session.execute(text("SET LOCAL enable_indexscan = off"))
            exact = await search_passages(session, search)

        assert walks >= 1, search  # (an iterative scan may count each of its passes)
        assert sorts == "on"  # the next statements of the transaction are planned as usual
        assert [hit.passage.id for hit in found] == [hit.passage.id for hit in exact]
        assert len(found) == 10


async def test_sorts_are_on_again_after_a_walk_that_found_nothing(sessionmaker):
    nothing = select(literal(1).label("one")).where(false())
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await session.execute(text("SET LOCAL enable_sort = off"))  # as index_pays leaves them when it pays
        found = list(await session.execute(sorts_back_on(nothing)))
        sorts = await session.scalar(text("SELECT current_setting('enable_sort')"))

    assert found == []
    assert sorts == "on"


async def test_an_unfiltered_search_picks_its_plan_from_the_archives_kept_counts_reading_no_passage(db, sessionmaker):
    # Counting the passages, even with a LIMIT, could read every one of a big archive's index entries
    # first (a bitmap scan, with sequential scans off): 8 ms at 83k passages, the one part of a search
    # that grew with the archive (issue 30).
    archive_id = await seed(db, 1530)
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await prepare(session, search_of(archive_id), 10)  # the settings, as a search's first statement makes them
        plans = {}
        for name, search in (("whole", search_of(archive_id)), ("rare", search_of(archive_id, tags=["rare"]))):
            counted = search.index_pays_statement()
            assert counted is not None
            plans[name] = await plan_of(session, counted, search.filter_parameters(10), analyze=True)
        await db.execute("UPDATE archive SET passage_count = 400 WHERE id = $1", archive_id)
        _, below_an_exact_scans_cost = await prepare(session, search_of(archive_id), 10)

    assert " on passage" not in plans["whole"], plans["whole"]
    assert " on passage" in plans["rare"], plans["rare"]  # a filter's passages are counted
    assert not below_an_exact_scans_cost  # 400 < 768,000 / 1,536 passages: the count, not the rows, decided

"""Hybrid archival search: a passage found only by a rare word of the query (its vector far from the
query's) is returned when search_archival_hybrid is on, not with it off; the filters bind the
full-text ranking as they bind the vector one."""

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.db.vectors import vector_bytes
from memvm.ids import new_id
from memvm.search import passages
from memvm.search.passages import PassageSearch, search_passages
from memvm.search.tuning import SearchTuning
from tests.search.test_vector_index import DIM, MODEL, insert_archive, unit_vector
from tests.support.events import listening

OLD, NEW = datetime(2020, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)
QUERY = "what did Zanzibar say"


async def seed(db) -> tuple[str, list[float]]:
    """30 passages near the query vector, and two that name Zanzibar with the opposite vector: one
    old and tagged travel, one new and tagged work. Returns the archive and the query vector."""
    rng = random.Random(11)
    query_vector = unit_vector(rng)
    archive_id = await insert_archive(db)
    near = [(f"note {n} about the weather", [q + rng.gauss(0, 0.02) for q in query_vector], ["work"], NEW) for n in range(30)]
    far = [-q for q in query_vector]
    named = [("Zanzibar left for the coast", far, ["travel"], OLD), ("Zanzibar joined the team", far, ["work"], NEW)]
    await db.executemany(
        "INSERT INTO passage (id, archive_id, text, embedding, embedding_model, embedding_dim, tags, metadata, writer_type,"
        " organization_id, created_at) VALUES ($1, $2, $3, $4::vector, $5, $6, $7, '{}', 'api', $8, $9)",
        [
            (new_id("passage"), archive_id, text, str(vector), MODEL, DIM, tags, DEFAULT_ORGANIZATION_ID, created_at)
            for text, vector, tags, created_at in near + named
        ],
    )
    return archive_id, query_vector


async def found_texts(sessionmaker, archive_id, query_vector, *, hybrid=True, **filters) -> list[str]:
    search = PassageSearch(
        archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=query_vector, top_k=5, query=QUERY, **filters
    )
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        hits = await search_passages(session, search, SearchTuning(archival_hybrid=hybrid))
    return [hit.passage.text for hit in hits]


async def test_a_rare_word_finds_a_passage_only_when_hybrid(db, sessionmaker):
    archive_id, query_vector = await seed(db)

    hybrid = await found_texts(sessionmaker, archive_id, query_vector)
    vector_only = await found_texts(sessionmaker, archive_id, query_vector, hybrid=False)

    assert len(hybrid) == len(vector_only) == 5
    assert {"Zanzibar left for the coast", "Zanzibar joined the team"} <= set(hybrid)
    assert not any("Zanzibar" in text for text in vector_only)


async def test_tags_and_dates_filter_the_full_text_matches(db, sessionmaker):
    archive_id, query_vector = await seed(db)

    tagged = await found_texts(sessionmaker, archive_id, query_vector, tags=["travel"])
    recent = await found_texts(sessionmaker, archive_id, query_vector, start=datetime(2025, 1, 1, tzinfo=UTC))
    early = await found_texts(sessionmaker, archive_id, query_vector, end=datetime(2021, 1, 1, tzinfo=UTC))

    assert tagged == ["Zanzibar left for the coast"]
    assert "Zanzibar joined the team" in recent and "Zanzibar left for the coast" not in recent
    assert early == ["Zanzibar left for the coast"]


def test_the_deployment_setting_reaches_the_tuning(settings):
    assert SearchTuning.of(settings).archival_hybrid is True
    assert SearchTuning.of(settings.model_copy(update={"search_archival_hybrid": False})).archival_hybrid is False


@contextmanager
def sent_statements() -> Iterator[list[tuple[str, Sequence[Any]]]]:
    """Each statement this process sends while the block runs, with its parameters as the driver gets them."""
    sent: list[tuple[str, Sequence[Any]]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Sequence[Any], *args: Any) -> None:
        sent.append((statement, parameters))

    with listening(Engine, ("before_cursor_execute", record)):
        yield sent


async def test_a_hybrid_search_takes_three_statements_and_reads_only_the_kept_passages(db, sessionmaker):
    archive_id, query_vector = await seed(db)
    packed = vector_bytes(query_vector)

    with sent_statements() as sent:
        found = await found_texts(sessionmaker, archive_id, query_vector)

    assert "Zanzibar joined the team" in found
    # The settings, the lexemes and whether the index pays (from the archive's kept count) in one
    # statement; then both rankings' candidates, which carry no text; then the kept passages by id.
    first, candidates, chosen = (sql for sql, _ in sent)
    assert "hnsw.ef_search" in first and "to_tsvector" in first and "decision.pays" in first
    assert "UNION ALL" in candidates and "passage.text" not in candidates
    assert "passage.text" in chosen and "UNION ALL" not in chosen
    # Two lexemes (zanzibar, say): the vector branch and each lexeme's branch compare with one
    # parameter, and the kept passages' distances with one more.
    assert [len([value for value in parameters if value == packed]) for _, parameters in sent] == [0, 1, 1]
    ids = next(value for value in sent[2][1] if isinstance(value, list))
    assert len(ids) == len(found) == 5


async def test_a_kept_passage_deleted_before_its_row_is_read_is_left_out(db, sessionmaker):
    archive_id, query_vector = await seed(db)
    search = PassageSearch(archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=query_vector, top_k=5, query=QUERY)
    kept = await db.fetch("SELECT id FROM passage WHERE archive_id = $1 ORDER BY text LIMIT 3", archive_id)
    ids = [row["id"] for row in kept]
    await db.execute("DELETE FROM passage WHERE id = $1", ids[1])  # as another transaction may, between two statements

    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        rows = await passages._chosen(session, search, ids)

    assert [row.id for row in rows] == [ids[0], ids[2]]
    assert all(0.0 <= row.distance <= 2.0 for row in rows)

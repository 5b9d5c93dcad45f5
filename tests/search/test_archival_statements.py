"""The archival search's statements are built and compiled once per shape (filters, lexeme count, plan)
with every value a parameter: a second search of that shape sends the same SQL with its own values, and
the organization it runs in is one of them (db/direct.py fills it in from the session)."""

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.uow import transaction
from memvm.search.passages import PassageSearch, search_passages
from tests.search.test_archival_hybrid import QUERY, seed, sent_statements
from tests.search.test_vector_index import DIM, MODEL


async def test_a_search_of_a_known_shape_runs_the_same_statement_with_its_own_values_and_organization(db, sessionmaker):
    archive_id, query_vector = await seed(db)

    async def found(organization_id: str, tag: str) -> list[str]:
        search = PassageSearch(
            archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=query_vector, top_k=5, query=QUERY, tags=[tag]
        )
        async with transaction(sessionmaker, organization_id) as session:
            return [hit.passage.text for hit in await search_passages(session, search)]

    with sent_statements() as sent:
        travel = await found(DEFAULT_ORGANIZATION_ID, "travel")
        work = await found(DEFAULT_ORGANIZATION_ID, "work")
        elsewhere = await found("org-elsewhere", "travel")
    searched = [(sql, parameters) for sql, parameters in sent if "UNION ALL" in sql]  # the hybrid candidates

    assert travel == ["Zanzibar left for the coast"]
    assert "Zanzibar joined the team" in work and "Zanzibar left for the coast" not in work
    assert elsewhere == []  # the archive is the default organization's
    assert len(searched) == 3 and len({sql for sql, _ in searched}) == 1
    assert [DEFAULT_ORGANIZATION_ID in parameters for _, parameters in searched] == [True, True, False]
    assert "org-elsewhere" in searched[2][1]

"""The archival search's statements are built once per shape (filters, lexeme count, plan) with every
value a parameter: a second search of that shape runs the same statement object (so SQLAlchemy reuses
its cache key and compiled form) with its own values, and the session still scopes it to the
organization it runs in (db/tenancy.py)."""

from typing import Any

from sqlalchemy.orm import ORMExecuteState

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.tenancy import TenantSession
from memvm.db.uow import transaction
from memvm.search.passages import PassageSearch, search_passages
from tests.search.test_archival_hybrid import QUERY, seed
from tests.search.test_vector_index import DIM, MODEL
from tests.support.events import listening


async def test_a_search_of_a_known_shape_runs_the_same_statement_with_its_own_values_and_organization(db, sessionmaker):
    archive_id, query_vector = await seed(db)
    searched: list[Any] = []

    def record(state: ORMExecuteState) -> None:
        if "UNION ALL" in str(state.statement):  # the hybrid search's candidates
            searched.append(state.statement)

    async def found(organization_id: str, tag: str) -> list[str]:
        search = PassageSearch(
            archive_ids=[archive_id], model=MODEL, dim=DIM, query_vector=query_vector, top_k=5, query=QUERY, tags=[tag]
        )
        async with transaction(sessionmaker, organization_id) as session:
            return [hit.passage.text for hit in await search_passages(session, search)]

    with listening(TenantSession, ("do_orm_execute", record)):
        travel = await found(DEFAULT_ORGANIZATION_ID, "travel")
        work = await found(DEFAULT_ORGANIZATION_ID, "work")
        elsewhere = await found("org-elsewhere", "travel")

    assert travel == ["Zanzibar left for the coast"]
    assert "Zanzibar joined the team" in work and "Zanzibar left for the coast" not in work
    assert elsewhere == []  # the archive is the default organization's
    assert len(searched) == 3 and searched[0] is searched[1]

"""Direct statements sent to the driver itself (db/direct.py) once their transaction has begun: they
stay in the transaction, fail with the exceptions SQLAlchemy raises, and return SQLAlchemy's rows.

Which way a statement went is seen by counting asyncpg's `Connection.fetch`, which only the driver
way calls (SQLAlchemy's adapter runs prepared statements)."""

from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import bindparam, func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, NoResultFound

from memvm.db import direct
from memvm.db.direct import ORGANIZATION, Direct
from memvm.db.uow import reading, transaction
from memvm.orm import Block
from tests.db.test_direct import NAMED, ORGANIZATIONS, RENAME, two_organizations  # noqa: F401 (a fixture)
from tests.support.events import listening

pytestmark = pytest.mark.usefixtures("two_organizations")  # a block labelled `shared` in each organization

BLOCKS = Block.__table__.c
VALUE_OF = Direct(select(BLOCKS.value).where(BLOCKS.organization_id == bindparam(ORGANIZATION), BLOCKS.id == bindparam("id")))
BACKEND = Direct(select(func.pg_backend_pid()), tenant=False)
LONGER = Direct(
    update(Block.__table__)
    .where(BLOCKS.organization_id == bindparam(ORGANIZATION), BLOCKS.label == bindparam("label"))
    .values(value=BLOCKS.value + bindparam("suffix"))
    .returning(BLOCKS.id, BLOCKS.value)
)


@pytest.fixture
def driver_fetches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The SQL of every `asyncpg.Connection.fetch` call while the test runs."""
    sent: list[str] = []
    fetch = asyncpg.Connection.fetch

    async def counted(self: asyncpg.Connection, query: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(query)
        return await fetch(self, query, *args, **kwargs)

    monkeypatch.setattr(asyncpg.Connection, "fetch", counted)
    yield sent


async def test_the_first_statement_begins_through_sqlalchemy_and_the_next_go_to_the_driver_inside_it(
    sessionmaker, driver_fetches, db
):
    with pytest.raises(RuntimeError):
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            first = (await direct.run(session, NAMED, {"label": "shared"})).one()
            assert driver_fetches == []  # with it, SQLAlchemy sent the BEGIN
            changed = (await direct.run(session, LONGER, {"label": "shared", "suffix": "+1"})).one()
            seen = (await direct.run(session, VALUE_OF, {"id": "block-direct-0"})).scalar_one()
            assert len(driver_fetches) == 2
            raise RuntimeError("the step failed after the write")

    assert (first.id, first.value) == ("block-direct-0", ORGANIZATIONS[0])
    assert changed._asdict() == {"id": "block-direct-0", "value": f"{ORGANIZATIONS[0]}+1"}
    assert seen == f"{ORGANIZATIONS[0]}+1"  # the transaction saw its own write ...
    assert await db.fetchval("SELECT value FROM block WHERE id = 'block-direct-0'") == ORGANIZATIONS[0]  # ... undone


async def test_a_read_only_unit_has_no_transaction_and_its_reads_go_to_the_driver(sessionmaker, driver_fetches):
    async with reading(sessionmaker, ORGANIZATIONS[1]) as session:
        rows = (await direct.run(session, NAMED, {"label": "shared"})).all()

    assert [tuple(row) for row in rows] == [("block-direct-1", ORGANIZATIONS[1])]
    assert len(driver_fetches) == 1


async def test_empty_results_answer_as_sqlalchemys_do(sessionmaker, driver_fetches):
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        await direct.run(session, NAMED, {"label": "shared"})
        assert (await direct.run(session, NAMED, {"label": "missing"})).first() is None
        assert list((await direct.run(session, NAMED, {"label": "missing"})).scalars()) == []
        assert (await direct.run(session, VALUE_OF, {"id": "block-missing"})).scalar() is None
        with pytest.raises(NoResultFound):
            (await direct.run(session, VALUE_OF, {"id": "block-missing"})).one()
    assert len(driver_fetches) == 4


async def test_a_constraint_violation_on_the_driver_is_sqlalchemys_integrity_error(sessionmaker, driver_fetches, db):
    too_long = "x" * 101  # over the block's char_limit: the database's check refuses it
    with pytest.raises(IntegrityError) as refused:
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            await direct.run(session, NAMED, {"label": "shared"})
            await direct.run(session, RENAME, {"label": "shared", "value": too_long})

    assert driver_fetches  # the refused statement went to the driver
    assert refused.value.orig.sqlstate == "23514"  # type: ignore[union-attr] # what api/errors.py's table reads
    assert "ck_block_value_within_limit" in str(refused.value.orig)
    assert await db.fetchval("SELECT value FROM block WHERE id = 'block-direct-0'") == ORGANIZATIONS[0]


async def test_a_connection_lost_on_the_driver_is_invalidated_as_sqlalchemy_does(sessionmaker, driver_fetches, db):
    with pytest.raises(RuntimeError):
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            backend = (await direct.run(session, BACKEND)).scalar_one()
            await db.execute("SELECT pg_terminate_backend($1)", backend)
            with pytest.raises(DBAPIError) as lost:
                await direct.run(session, NAMED, {"label": "shared"})
            raise RuntimeError("the request fails; its transaction is rolled back")

    assert driver_fetches  # the statement that found the connection gone went to the driver
    assert lost.value.connection_invalidated  # api/errors.py answers 503 (retry) for it, not 500
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:  # the pool gives a new connection
        await direct.run(session, NAMED, {"label": "shared"})
        assert (await direct.run(session, BACKEND)).scalar_one() != backend


async def test_statements_go_through_sqlalchemy_while_something_listens_to_them(sessionmaker, driver_fetches):
    recorded: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        recorded.append(statement)

    with listening(Engine, ("before_cursor_execute", record)):
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            await direct.run(session, NAMED, {"label": "shared"})
            await direct.run(session, VALUE_OF, {"id": "block-direct-0"})

    assert driver_fetches == []
    assert len([sql for sql in recorded if "FROM block" in sql]) == 2

"""Direct statements (db/direct.py) skip the session's per-execution work, not its guarantees: each
runs in its session's transaction and organization, refuses writes in a read-only unit, sees what the
session has pending, and fails with SQLAlchemy's errors (so with the HTTP error table's codes)."""

import asyncpg
import pytest
from sqlalchemy import String, bindparam, func, select, true, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.db import direct
from memvm.db.direct import ORGANIZATION, Direct, NotDirect
from memvm.db.tenancy import ALL_ORGANIZATIONS, UnscopedSession
from memvm.db.uow import WriteWhileReading, reading, transaction
from memvm.orm import Block

ORGANIZATIONS = ("org-direct-a", "org-direct-b")
BLOCKS = Block.__table__.c
IN_ORGANIZATION = BLOCKS.organization_id == bindparam(ORGANIZATION)
NAMED = Direct(select(BLOCKS.id, BLOCKS.value).where(IN_ORGANIZATION, BLOCKS.label == bindparam("label")))
RENAME = Direct(
    update(Block.__table__).where(IN_ORGANIZATION, BLOCKS.label == bindparam("label")).values(value=bindparam("value"))
)


@pytest.fixture
async def two_organizations(db: asyncpg.Connection) -> None:
    """A block labelled `shared` in each organization, its value the organization's id."""
    for n, organization_id in enumerate(ORGANIZATIONS):
        await db.execute("INSERT INTO organization (id, name) VALUES ($1, $2)", organization_id, organization_id)
        await db.execute(
            "INSERT INTO block (organization_id, id, label, value, char_limit, read_only, metadata, tags, version)"
            " VALUES ($1, $2, 'shared', $3, 100, false, '{}', '{}', 1)",
            organization_id,
            f"block-direct-{n}",
            organization_id,
        )


async def test_a_direct_statement_sees_and_changes_only_its_sessions_organization(sessionmaker, two_organizations, db):
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        seen = (await direct.run(session, NAMED, {"label": "shared"})).all()
        await direct.run(session, RENAME, {"label": "shared", "value": "renamed"})

    assert [tuple(row) for row in seen] == [("block-direct-0", ORGANIZATIONS[0])]
    assert await db.fetch("SELECT organization_id, value FROM block WHERE label = 'shared' ORDER BY id") == [
        (ORGANIZATIONS[0], "renamed"),
        (ORGANIZATIONS[1], ORGANIZATIONS[1]),
    ]


async def test_the_organization_is_the_sessions_and_nobody_elses(sessionmaker, two_organizations):
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        with pytest.raises(NotDirect, match="fills it in"):
            await direct.run(session, NAMED, {"label": "shared", ORGANIZATION: ORGANIZATIONS[1]})
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        with pytest.raises(UnscopedSession):
            await direct.run(session, NAMED, {"label": "shared"})


async def test_a_statement_without_its_organization_or_run_with_the_wrong_parameters_is_refused(sessionmaker, two_organizations):
    everyone = Direct(select(BLOCKS.id).where(BLOCKS.label == bindparam("label")))
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        with pytest.raises(NotDirect, match=ORGANIZATION):
            await direct.run(session, everyone, {"label": "shared"})
        with pytest.raises(NotDirect, match="without label"):
            await direct.run(session, NAMED)
        with pytest.raises(NotDirect, match="no parameter description"):
            await direct.run(session, RENAME, {"label": "shared", "value": "renamed", "description": "dropped"})


async def test_a_statement_of_no_organizations_table_says_so_and_runs_without_the_organization(sessionmaker):
    settings = select(func.set_config("application_name", bindparam("name", type_=String), true()))
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        with pytest.raises(NotDirect, match=ORGANIZATION):
            await direct.run(session, Direct(settings), {"name": "direct"})
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        named = (await direct.run(session, Direct(settings, tenant=False), {"name": "direct"})).scalar()
        seen = (await session.execute(select(func.current_setting("application_name")))).scalar()

    assert named == seen == "direct"


async def test_a_write_is_refused_in_a_read_only_unit_and_rolled_back_with_its_transaction(sessionmaker, two_organizations, db):
    async with reading(sessionmaker, ORGANIZATIONS[0]) as session:
        with pytest.raises(WriteWhileReading):
            await direct.run(session, RENAME, {"label": "shared", "value": "renamed"})
    with pytest.raises(RuntimeError):
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            await direct.run(session, RENAME, {"label": "shared", "value": "renamed"})
            raise RuntimeError("the step failed after the write")

    assert await db.fetchval("SELECT value FROM block WHERE id = 'block-direct-0'") == ORGANIZATIONS[0]


async def test_what_the_session_has_pending_is_stored_first(sessionmaker: async_sessionmaker[AsyncSession], two_organizations):
    async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
        session.add(Block(id="block-direct-new", label="pending", value="not flushed yet", char_limit=100))
        seen = (await direct.run(session, NAMED, {"label": "pending"})).all()

    assert [tuple(row) for row in seen] == [("block-direct-new", "not flushed yet")]


async def test_a_constraint_violation_is_sqlalchemys_integrity_error(sessionmaker, two_organizations, db):
    too_long = "x" * 101  # over the block's char_limit: the database's check refuses it
    with pytest.raises(IntegrityError):
        async with transaction(sessionmaker, ORGANIZATIONS[0]) as session:
            await direct.run(session, RENAME, {"label": "shared", "value": too_long})

    assert await db.fetchval("SELECT value FROM block WHERE id = 'block-direct-0'") == ORGANIZATIONS[0]

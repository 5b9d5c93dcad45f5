"""Units of work that only read (db/uow.py `reading`): no transaction block, so a GET sends neither
BEGIN nor COMMIT; still scoped to the caller's organization; and every write or row lock is refused
before it reaches the database, where without a transaction it would take effect (or end) at once."""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.config import Settings
from memvm.db.engine import build_engine, build_sessionmaker
from memvm.db.uow import WriteWhileReading, reading, transaction
from memvm.ids import new_id
from memvm.orm import Block
from tests.db.test_tenant_writes import recorded_statements
from tests.loop.test_turn_round_trips import counted, quiet_client
from tests.support.api import create_agent, keyed_client
from tests.support.events import listening

MODEL = {"model": "openai/scripted-model"}


@contextmanager
def sent_alone(engine: Engine) -> Iterator[list[str]]:
    """What asyncpg sends as a query of its own (BEGIN, COMMIT, ROLLBACK): SQLAlchemy's statement
    events never see these, so they are recorded on each connection the pool hands out."""
    sent: list[str] = []
    watched: list[Any] = []

    def log(record: Any) -> None:
        sent.append(record.query)

    def watch(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        driver = dbapi_connection.driver_connection
        if driver not in watched:
            driver.add_query_logger(log)
            watched.append(driver)

    try:
        with listening(engine, ("checkout", watch)):
            yield sent
    finally:
        for driver in watched:
            driver.remove_query_logger(log)


async def test_a_get_sends_no_begin_and_no_commit(settings):
    async with quiet_client(settings) as (client, engine):
        agent = await create_agent(client, **MODEL)
        block = agent["memory"]["blocks"][0]
        reads = [
            f"/v1/agents/{agent['id']}",
            "/v1/agents/",
            f"/v1/blocks/{block['id']}",
            "/v1/blocks/",
            f"/v1/agents/{agent['id']}/core-memory/blocks",
            f"/v1/agents/{agent['id']}/core-memory/blocks/{block['label']}",
            f"/v1/agents/{agent['id']}/messages",
            "/v1/runs/",
        ]
        with sent_alone(engine) as read_alone, counted(engine) as read:
            answers = [await client.get(url) for url in reads]
            await asyncio.sleep(0)  # asyncpg calls its query loggers soon, not at once
        with sent_alone(engine) as written_alone:
            created = await client.post("/v1/blocks/", json={"label": "notes", "value": "Likes tea."})
            await asyncio.sleep(0)

    assert [answer.status_code for answer in answers] == [200] * len(reads)
    assert read_alone == [] and read.transactions == 0, read_alone
    assert read.statements >= len(reads)  # the recorder was there; only the transaction's two are gone
    assert created.status_code == 200 and [sql.split()[0] for sql in written_alone] == ["BEGIN", "COMMIT;"]


async def test_another_organizations_agent_and_block_are_not_found_on_the_read_path(settings):
    async with keyed_client(settings, "a", "b") as (client, (a, b)):
        body = {"memory_blocks": [{"label": "human", "value": "A's"}], **MODEL}
        created = await client.post("/v1/agents/", json=body, headers=a)
        agent = created.json()
        urls = [f"/v1/agents/{agent['id']}", f"/v1/blocks/{agent['memory']['blocks'][0]['id']}"]
        urls += [f"/v1/agents/{agent['id']}/core-memory/blocks", f"/v1/agents/{agent['id']}/core-memory/blocks/human"]
        as_b = [(await client.get(url, headers=b)).status_code for url in urls]
        as_a = [(await client.get(url, headers=a)).status_code for url in urls]
        b_lists = [(await client.get(url, headers=b)).json() for url in ("/v1/agents/", "/v1/blocks/")]

    assert created.status_code == 200, created.text
    assert as_b == [404] * len(urls) and as_a == [200] * len(urls)
    assert b_lists == [[], []]


async def stored_block(sessionmaker) -> Block:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        block = Block(id=new_id("block"), label="notes", value="Likes tea.", char_limit=100)
        session.add(block)
    return block


async def test_adding_a_row_while_reading_is_refused_before_anything_is_sent(sessionmaker, db):
    with recorded_statements() as sent, pytest.raises(WriteWhileReading, match="Block"):
        async with reading(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            session.add(Block(id=new_id("block"), label="planted", value="x", char_limit=100))
            await session.flush()

    assert sent == [] and await db.fetchval("SELECT count(*) FROM block") == 0


async def test_a_change_left_pending_when_reading_ends_is_refused(sessionmaker, db):
    block = await stored_block(sessionmaker)
    with pytest.raises(WriteWhileReading, match="Block"):
        async with reading(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            (await session.get(Block, (DEFAULT_ORGANIZATION_ID, block.id))).value = "taken over"

    assert await db.fetchval("SELECT value FROM block WHERE id = $1", block.id) == "Likes tea."


UPDATES = {
    "orm": lambda block_id: update(Block).where(Block.id == block_id).values(value="x"),
    "core": lambda block_id: update(Block.__table__).where(Block.__table__.c.id == block_id).values(value="x"),
}


@pytest.mark.parametrize("statement", UPDATES)
async def test_an_update_while_reading_is_refused_before_it_is_sent(sessionmaker, db, statement):
    block = await stored_block(sessionmaker)
    with recorded_statements() as sent, pytest.raises(WriteWhileReading, match="UPDATE"):
        async with reading(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            await session.execute(UPDATES[statement](block.id))

    assert sent == [] and await db.fetchval("SELECT value FROM block WHERE id = $1", block.id) == "Likes tea."


async def test_a_row_lock_while_reading_is_refused(sessionmaker):
    block = await stored_block(sessionmaker)
    async with reading(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        with pytest.raises(WriteWhileReading, match="row locks"):
            await session.scalar(select(Block).where(Block.id == block.id).with_for_update())
        with pytest.raises(WriteWhileReading):
            await session.get(Block, (DEFAULT_ORGANIZATION_ID, block.id), with_for_update={"read": True})
        assert (await session.scalar(select(Block).where(Block.id == block.id))).value == "Likes tea."


async def test_reading_is_scoped_to_its_organization(sessionmaker):
    block = await stored_block(sessionmaker)
    async with reading(sessionmaker, "org-00000000-0000-4000-8000-0000000000bb") as session:
        assert await session.scalar(select(Block).where(Block.id == block.id)) is None


async def test_a_connection_read_on_is_transactional_again_for_the_next_unit(database_url, db):
    # One connection in the pool: the transaction after the read gets the connection the read had,
    # and its rollback must still take back what it wrote.
    engine = build_engine(database_url, Settings(db_pool_size=1, db_max_overflow=0))
    sessionmaker = build_sessionmaker(engine)
    try:
        async with reading(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            await session.scalar(select(Block))
        with pytest.raises(LookupError):
            async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
                session.add(Block(id=new_id("block"), label="notes", value="rolled back", char_limit=100))
                await session.flush()
                raise LookupError
    finally:
        await engine.dispose()

    assert await db.fetchval("SELECT count(*) FROM block") == 0

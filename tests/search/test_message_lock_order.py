"""Statements that write several messages at once lock them in the order of their ids. A compaction's
eviction and the embedding worker's store of the same messages' vectors each locked them in its own
order (the scan's, the batch's) and could deadlock, failing the turn."""

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.ids import new_id
from memvm.messages import repository
from memvm.search.embedding_queue import CLAIM_TIMEOUT_SECONDS, QUEUES
from tests.search.test_embedding_queue import add_agent_with_messages, add_messages
from tests.support.pg import asyncpg_dsn, until_waiting

MESSAGE_QUEUE = next(queue for queue in QUEUES if queue.table == "message")
Write = Callable[[], Awaitable[object]]


async def _messages_stored_lowest_id_last(db: asyncpg.Connection, agent_id: str) -> list[str]:
    """Six messages whose lowest id is stored last: a scan in stored order meets it last."""
    ids = sorted(new_id("message") for _ in range(6))
    await add_messages(db, agent_id, ids[::-1])
    return ids


def _in_organization(sessionmaker: async_sessionmaker[AsyncSession], write: Callable[[AsyncSession], Awaitable[object]]) -> Write:
    async def run() -> object:
        async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
            return await write(session)

    return run


async def _evict(sessionmaker: async_sessionmaker[AsyncSession], agent_id: str, ids: list[str]) -> Write:
    return _in_organization(sessionmaker, lambda session: repository.evict(session, ids))


async def _evict_all(sessionmaker: async_sessionmaker[AsyncSession], agent_id: str, ids: list[str]) -> Write:
    return _in_organization(sessionmaker, lambda session: repository.evict_all(session, agent_id, None))


async def _queue_reembedding(sessionmaker: async_sessionmaker[AsyncSession], agent_id: str, ids: list[str]) -> Write:
    return _in_organization(sessionmaker, lambda session: repository.queue_reembedding(session, agent_id))


async def _store_vectors(sessionmaker: async_sessionmaker[AsyncSession], agent_id: str, ids: list[str]) -> Write:
    """The worker's claim of the batch (in the queue's order: by time) and its vectors; then its store.
    Claimed first: a claim skips rows locked by others."""
    claim = {"timeout": CLAIM_TIMEOUT_SECONDS, "organization_id": DEFAULT_ORGANIZATION_ID, "batch": len(ids)}
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        claimed = (await session.execute(MESSAGE_QUEUE.claim, claim)).all()
    claimed.sort(key=lambda row: row[0], reverse=True)  # a claim returns its rows in no defined order
    embedder = EmbedderRegistry().for_handle(None)
    values = {
        "organization_id": DEFAULT_ORGANIZATION_ID,
        "keys": [row[0] for row in claimed],
        "claimed_at": [row[4] for row in claimed],
        "vectors": await embedder.embed([row[1] for row in claimed]),
        "model": embedder.model,
        "dim": embedder.dim,
    }

    async def store() -> object:
        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            return await session.execute(MESSAGE_QUEUE.store, values)

    return store


async def _other_messages(db: asyncpg.Connection, count: int) -> None:
    """Another agent's messages, out of its window: a larger table. Stored after the six, so the
    embedding queue's claim (oldest first) takes the six."""
    agent_id = await add_agent_with_messages(db, 0)
    await db.execute(
        "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts, organization_id, seq)"
        " SELECT 'message-' || gen_random_uuid(), $1, 'user', 'message', 'x', false, 0, $2, n FROM generate_series(1, $3) AS n",
        agent_id,
        DEFAULT_ORGANIZATION_ID,
        count,
    )
    await db.execute("ANALYZE message")


# Each write with the table's size at which its plan locked the rows out of order before: the
# evictions scanning a small table in stored order, the store looping over its batch in the batch's
# order once the table is larger.
@pytest.mark.parametrize(
    ("prepare", "other_messages", "written"),
    [
        (_evict, 0, "NOT in_context"),
        (_evict_all, 0, "NOT in_context"),
        (_queue_reembedding, 0, "embedding IS NULL"),
        (_store_vectors, 2000, "embedding IS NOT NULL"),
    ],
)
async def test_a_write_of_several_messages_locks_them_in_the_order_of_their_ids(
    db, database_url, sessionmaker, prepare, other_messages, written
):
    agent_id = await add_agent_with_messages(db, 0)
    ids = await _messages_stored_lowest_id_last(db, agent_id)
    await _other_messages(db, other_messages)
    write = await prepare(sessionmaker, agent_id, ids)
    holder = await asyncpg.connect(**asyncpg_dsn(database_url))
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM message WHERE id = $1 FOR UPDATE", ids[0])
            task = asyncio.create_task(write())
            await until_waiting(db, task)
            async with db.transaction():  # waiting for the lowest id, the write holds none of the others
                held = [
                    message_id
                    for message_id in ids[1:]
                    if await db.fetchval("SELECT 1 FROM message WHERE id = $1 FOR UPDATE SKIP LOCKED", message_id) is None
                ]
        await task
    finally:
        await holder.close()

    assert held == []
    assert await db.fetchval(f"SELECT count(*) FROM message WHERE agent_id = $1 AND {written}", agent_id) == len(ids)

"""Message embeddings, computed after commit so a turn never waits for them.

The queue is the message table itself: rows without a vector. A worker in every replica claims
a batch with FOR UPDATE SKIP LOCKED (no two replicas embed the same row), embeds it outside any
transaction, and writes the vectors back. A claim older than CLAIM_TIMEOUT is taken over, so a
crash or restart never leaves messages unembedded; a row failing MAX_ATTEMPTS times is dropped
from the queue (it stays findable by full text).
"""

import asyncio
import contextlib
import logging
from collections import defaultdict

from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.orm import Message
from memvm.orm.message import EMBEDDING_QUEUE_PREDICATE

log = logging.getLogger(__name__)
_STORE = (
    update(Message)
    .where(Message.id == bindparam("key"))
    .values(embedding=bindparam("vector", type_=Vector()), embed_claimed_at=None)
)
CLAIM_TIMEOUT_SECONDS = 60

_CLAIM = text(f"""
    UPDATE message AS m
    SET embed_claimed_at = clock_timestamp(), embed_attempts = m.embed_attempts + 1
    FROM agent AS a
    WHERE a.id = m.agent_id AND m.id IN (
        SELECT id FROM message
        WHERE {EMBEDDING_QUEUE_PREDICATE}
          AND (embed_claimed_at IS NULL OR embed_claimed_at < clock_timestamp() - make_interval(secs => :timeout))
        ORDER BY seq
        LIMIT :batch
        FOR UPDATE SKIP LOCKED)
    RETURNING m.id, m.content, a.embedding
""")


async def embed_pending_messages(
    sessionmaker: async_sessionmaker[AsyncSession], embedders: EmbedderRegistry, *, batch_size: int = 64
) -> int:
    """Embed one batch; returns how many messages were claimed (0: the queue is empty)."""
    async with transaction(sessionmaker) as session:
        claimed = (await session.execute(_CLAIM, {"timeout": CLAIM_TIMEOUT_SECONDS, "batch": batch_size})).all()
    by_handle: dict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for message_id, content, handle in claimed:
        by_handle[handle].append((message_id, content))
    for handle, rows in by_handle.items():
        embedder = embedders.for_handle(handle)
        vectors = await embedder.embed([content for _, content in rows])
        values = [{"key": message_id, "vector": vector} for (message_id, _), vector in zip(rows, vectors, strict=True)]
        async with transaction(sessionmaker) as session:
            connection = await session.connection()
            await connection.execute(_STORE.values(embedding_model=embedder.model, embedding_dim=embedder.dim), values)
    return len(claimed)


async def run_worker(
    sessionmaker: async_sessionmaker[AsyncSession], embedders: EmbedderRegistry, wakeup: asyncio.Event, *, poll_seconds: float
) -> None:
    """Drain the queue, then sleep until woken (a turn stored messages) or `poll_seconds` pass
    (rows written by another replica, or left behind by a crash)."""
    while True:
        try:
            claimed = await embed_pending_messages(sessionmaker, embedders)
        except Exception:
            log.exception("embedding messages failed; retrying later")
            claimed = 0
        if claimed:
            continue
        wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), poll_seconds)

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
from datetime import UTC, datetime

from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm import metrics
from memvm.db.engine import database_unreachable
from memvm.db.tenancy import ALL_ORGANIZATIONS
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
    RETURNING m.id, m.content, a.embedding, m.created_at
""")
_DEPTH = text(f"SELECT count(*) FROM message WHERE {EMBEDDING_QUEUE_PREDICATE} AND embed_claimed_at IS NULL")


async def embed_pending_messages(
    sessionmaker: async_sessionmaker[AsyncSession], embedders: EmbedderRegistry, *, batch_size: int = 64
) -> int:
    """Embed one batch; returns how many messages were claimed (0: the queue is empty)."""
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        claimed = (await session.execute(_CLAIM, {"timeout": CLAIM_TIMEOUT_SECONDS, "batch": batch_size})).all()
        metrics.EMBEDDING_DEPTH.set(await session.scalar(_DEPTH) or 0)
    by_handle: dict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for message_id, content, handle, _stored_at in claimed:
        by_handle[handle].append((message_id, content))
    for handle, rows in by_handle.items():
        embedder = embedders.for_handle(handle)
        vectors = await embedder.embed([content for _, content in rows])
        values = [{"key": message_id, "vector": vector} for (message_id, _), vector in zip(rows, vectors, strict=True)]
        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            connection = await session.connection()
            await connection.execute(_STORE.values(embedding_model=embedder.model, embedding_dim=embedder.dim), values)
    now = datetime.now(UTC)
    for *_, stored_at in claimed:
        metrics.EMBEDDING_LAG.observe((now - stored_at).total_seconds())
    metrics.EMBEDDED.inc(len(claimed))
    return len(claimed)


class EmbeddingWorker:
    """The queue's consumer in this replica. It drains the queue, then sleeps until woken (a turn
    stored messages) or `poll_seconds` pass (rows written by another replica, or left behind by a
    crash). `stop` lets the batch in progress finish: cancelling asyncpg in the middle of a
    multi-row write can leave its connection waiting for the rest of the rows forever."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedders: EmbedderRegistry,
        wakeup: asyncio.Event,
        *,
        poll_seconds: float,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._embedders = embedders
        self._wakeup = wakeup
        self._poll_seconds = poll_seconds
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Finish the batch in progress (at most `grace_seconds`), then end."""
        if self._task is None:
            return
        self._stopping = True
        self._wakeup.set()
        done, _ = await asyncio.wait({self._task}, timeout=grace_seconds)
        if not done:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while not self._stopping:
            try:
                claimed = await embed_pending_messages(self._sessionmaker, self._embedders)
            except Exception as error:
                if database_unreachable(error):  # an outage: one line per poll, not a traceback each
                    log.warning("embedding messages: the database is unreachable (%s); retrying later", error.__class__.__name__)
                else:
                    log.exception("embedding messages failed; retrying later")
                claimed = 0
            if claimed or self._stopping:
                continue
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._poll_seconds)

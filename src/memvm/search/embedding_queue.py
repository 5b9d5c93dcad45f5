"""Embeddings of stored messages and tools, computed after commit so a turn or a tool edit never
waits for them.

Each queue is a table itself: rows without a vector. A worker in every replica claims a batch with
FOR UPDATE SKIP LOCKED (no two replicas embed the same row), embeds it outside any transaction, and
writes the vectors back, only onto rows still under that claim: a tool edited meanwhile (its claim
dropped) keeps waiting for a vector of its new text. A claim older than CLAIM_TIMEOUT is taken over,
so a crash or restart never leaves rows unembedded; a row failing MAX_ATTEMPTS times is dropped
from the queue (it stays findable by full text).
"""

import asyncio
import contextlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from pgvector.sqlalchemy import Vector
from sqlalchemy import DateTime, String, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm import metrics
from memvm.db.engine import database_unreachable
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.orm import message as message_table
from memvm.orm import tool as tool_table

log = logging.getLogger(__name__)
CLAIM_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class EmbeddingQueue:
    """One table's rows waiting for a vector. `claim` returns id, text, handle (the embedding model;
    NULL: the default), stored_at and claimed_at of a batch."""

    claim: TextClause
    depth: TextClause
    store: TextClause


def _queue(table: str, predicate: str, *, text_column: str, handle: str, order: str, stored_at: str) -> EmbeddingQueue:
    claim = text(f"""
        UPDATE {table} AS q
        SET embed_claimed_at = clock_timestamp(), embed_attempts = q.embed_attempts + 1
        WHERE q.id IN (
            SELECT id FROM {table}
            WHERE {predicate}
              AND (embed_claimed_at IS NULL OR embed_claimed_at < clock_timestamp() - make_interval(secs => :timeout))
            ORDER BY {order}
            LIMIT :batch
            FOR UPDATE SKIP LOCKED)
        RETURNING q.id, q.{text_column}, {handle}, q.{stored_at}, q.embed_claimed_at
    """)
    # SQL, not an ORM update: a vector is not an edit, so a tool's updated_at stays as it was. One
    # statement for the whole batch, not one per row: asyncpg's executemany waits for its paused
    # writes to resume even once the connection is lost, so a database cut off mid-batch hung the
    # worker for good; a single statement fails with the connection.
    store = text(f"""
        UPDATE {table} AS q
        SET embedding = v.vector, embedding_model = :model, embedding_dim = :dim, embed_claimed_at = NULL
        FROM unnest(:keys, :claimed_at, :vectors) AS v(id, claimed_at, vector)
        WHERE q.id = v.id AND q.embed_claimed_at = v.claimed_at
    """).bindparams(
        bindparam("keys", type_=ARRAY(String())),
        bindparam("claimed_at", type_=ARRAY(DateTime(timezone=True))),
        bindparam("vectors", type_=ARRAY(Vector(), dimensions=1)),
    )
    depth = text(f"SELECT count(*) FROM {table} WHERE {predicate} AND embed_claimed_at IS NULL")
    return EmbeddingQueue(claim, depth, store)


QUEUES = (
    # A message is embedded with its agent's model.
    _queue(
        "message",
        message_table.EMBEDDING_QUEUE_PREDICATE,
        text_column="content",
        handle="(SELECT a.embedding FROM agent AS a WHERE a.id = q.agent_id)",
        order="seq",
        stored_at="created_at",
    ),
    # Tools, built-in ones included, with the server's default model.
    _queue(
        "tool",
        tool_table.EMBEDDING_QUEUE_PREDICATE,
        text_column="search_text",
        handle="NULL",
        order="updated_at",
        stored_at="updated_at",
    ),
)


async def embed_pending(
    sessionmaker: async_sessionmaker[AsyncSession], embedders: EmbedderRegistry, *, batch_size: int = 64
) -> int:
    """Embed one batch of each queue; returns how many rows were claimed (0: the queues are empty)."""
    params = {"timeout": CLAIM_TIMEOUT_SECONDS, "batch": batch_size}
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        claimed = [(queue, (await session.execute(queue.claim, params)).all()) for queue in QUEUES]
        metrics.EMBEDDING_DEPTH.set(sum([await session.scalar(queue.depth) or 0 for queue in QUEUES]))
    for queue, rows in claimed:
        by_handle: dict[str | None, list[tuple[str, str, datetime]]] = defaultdict(list)
        for row_id, content, handle, _stored_at, claimed_at in rows:
            by_handle[handle].append((row_id, content, claimed_at))
        for handle, batch in by_handle.items():
            await _embed(sessionmaker, embedders, handle, queue, batch)
    now = datetime.now(UTC)
    stored_at = [row[3] for _, rows in claimed for row in rows]
    for moment in stored_at:
        metrics.EMBEDDING_LAG.observe((now - moment).total_seconds())
    metrics.EMBEDDED.inc(len(stored_at))
    return len(stored_at)


async def _embed(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedders: EmbedderRegistry,
    handle: str | None,
    queue: EmbeddingQueue,
    batch: list[tuple[str, str, datetime]],
) -> None:
    embedder = embedders.for_handle(handle)
    vectors = await embedder.embed([content for _, content, _ in batch])
    if len(vectors) != len(batch):  # unnest would pad the shorter array with NULLs
        raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(batch)} texts")
    values = {
        "keys": [row_id for row_id, _, _ in batch],
        "claimed_at": [claimed_at for _, _, claimed_at in batch],
        "vectors": vectors,
        "model": embedder.model,
        "dim": embedder.dim,
    }
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        await session.execute(queue.store, values)


class EmbeddingWorker:
    """The queues' consumer in this replica. It drains them, then sleeps until woken (a turn stored
    messages, a tool was saved) or `poll_seconds` pass (rows written by another replica, or left behind by a
    crash). `stop` lets the batch in progress finish: cut off, its rows would wait for their claim to expire."""

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
                claimed = await embed_pending(self._sessionmaker, self._embedders)
            except Exception as error:
                if database_unreachable(error):  # an outage: one line per poll, not a traceback each
                    log.warning("embedding: the database is unreachable (%s); retrying later", error.__class__.__name__)
                else:
                    log.exception("embedding failed; retrying later")
                claimed = 0
            if claimed or self._stopping:
                continue
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._poll_seconds)

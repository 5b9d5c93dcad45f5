"""Embeddings of stored messages, tools and the chunks of folders' files, computed after commit so
a turn, a tool edit or a file's parse never waits for them.

Each queue is a table itself: rows without a vector. A worker in every replica claims a batch with
FOR UPDATE SKIP LOCKED (no two replicas embed the same row), embeds it outside any transaction, and
writes the vectors back, only onto rows still under that claim: a tool edited meanwhile (its claim
dropped) keeps waiting for a vector of its new text. A claim older than CLAIM_TIMEOUT is taken over,
so a crash or restart never leaves rows unembedded; a row failing MAX_ATTEMPTS times is dropped
from the queue (it stays findable by full text).
"""

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import BigInteger, DateTime, String, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.types import TypeEngine

from memvm import metrics
from memvm.db.queue_worker import QueueWorker
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.orm import file as file_table
from memvm.orm import message as message_table
from memvm.orm import tool as tool_table

CLAIM_TIMEOUT_SECONDS = 60
Key = str | int  # a queued row's id


@dataclass(frozen=True)
class EmbeddingQueue:
    """One table's rows waiting for a vector. `claim` returns id, text, handle (the embedding model;
    NULL: the default), stored_at and claimed_at of a batch."""

    claim: TextClause
    depth: TextClause
    store: TextClause


def _queue(
    table: str,
    predicate: str,
    *,
    text_column: str,
    handle: str,
    order: str,
    stored_at: str,
    key_type: type[TypeEngine[Any]] = String,
    after_store: str | None = None,
) -> EmbeddingQueue:
    """`handle` and `stored_at` are SQL over the queued row `q`, `key_type` the type of its id.
    `after_store` is a statement over `stored` (the rows just stored, RETURNING *) run as part of
    the store: one statement, so it counts every row stored exactly once, and fails with it."""
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
        RETURNING q.id, q.{text_column}, {handle}, {stored_at}, q.embed_claimed_at
    """)
    # SQL, not an ORM update: a vector is not an edit, so a tool's updated_at stays as it was. One
    # statement for the whole batch, not one per row: asyncpg's executemany waits for its paused
    # writes to resume even once the connection is lost, so a database cut off mid-batch hung the
    # worker for good; a single statement fails with the connection.
    update = f"""
        UPDATE {table} AS q
        SET embedding = v.vector, embedding_model = :model, embedding_dim = :dim, embed_claimed_at = NULL
        FROM unnest(:keys, :claimed_at, :vectors) AS v(id, claimed_at, vector)
        WHERE q.id = v.id AND q.embed_claimed_at = v.claimed_at
    """
    store = text(update if after_store is None else f"WITH stored AS ({update} RETURNING q.*) {after_store}").bindparams(
        bindparam("keys", type_=ARRAY(key_type())),
        bindparam("claimed_at", type_=ARRAY(DateTime(timezone=True))),
        bindparam("vectors", type_=ARRAY(Vector(), dimensions=1)),
    )
    depth = text(f"SELECT count(*) FROM {table} WHERE {predicate} AND embed_claimed_at IS NULL")
    return EmbeddingQueue(claim, depth, store)


# A file's progress, as its chunks get their vectors: `completed` once all have one. Counted up by
# each store rather than recounted (a file may have tens of thousands of chunks); a chunk is stored
# at most once, under its claim. Two stores for one file take turns on its row, the second adding to
# the first's count.
_FILE_PROGRESS = """
    UPDATE folder_file AS f
    SET chunks_embedded = coalesce(f.chunks_embedded, 0) + s.stored,
        processing_status = CASE WHEN coalesce(f.chunks_embedded, 0) + s.stored >= f.total_chunks
                                 THEN 'completed' ELSE f.processing_status END,
        updated_at = clock_timestamp()
    FROM (SELECT file_id, count(*) AS stored FROM stored GROUP BY file_id) AS s
    WHERE f.id = s.file_id AND f.processing_status = 'embedding'
"""

QUEUES = (
    # A message is embedded with its agent's model.
    _queue(
        "message",
        message_table.EMBEDDING_QUEUE_PREDICATE,
        text_column="content",
        handle="(SELECT a.embedding FROM agent AS a WHERE a.id = q.agent_id)",
        order="seq",
        stored_at="q.created_at",
    ),
    # Tools, built-in ones included, with the server's default model.
    _queue(
        "tool",
        tool_table.EMBEDDING_QUEUE_PREDICATE,
        text_column="search_text",
        handle="NULL",
        order="updated_at",
        stored_at="q.updated_at",
    ),
    # Chunks of folders' files, with their folder's model (a folder stores its embedder's `model`,
    # which is the handle it was made from). A file's progress is counted as its chunks are stored.
    _queue(
        "file_chunk",
        file_table.CHUNK_EMBEDDING_QUEUE_PREDICATE,
        text_column="text",
        handle="(SELECT f.embedding_model FROM folder AS f WHERE f.id = q.folder_id)",
        order="id",  # the order files were parsed in
        stored_at="(SELECT f.created_at FROM folder_file AS f WHERE f.id = q.file_id)",  # its upload
        key_type=BigInteger,
        after_store=_FILE_PROGRESS,
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
        by_handle: dict[str | None, list[tuple[Key, str, datetime]]] = defaultdict(list)
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
    batch: list[tuple[Key, str, datetime]],
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


class EmbeddingWorker(QueueWorker):
    """The queues' consumer in this replica, woken when a turn stored messages or a tool was saved,
    or a file's chunks were stored."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedders: EmbedderRegistry,
        wakeup: asyncio.Event,
        *,
        poll_seconds: float,
    ) -> None:
        super().__init__("embedding", lambda: embed_pending(sessionmaker, embedders), wakeup, poll_seconds=poll_seconds)

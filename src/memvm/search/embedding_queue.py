"""Embeddings of stored messages, tools and the chunks of folders' files, computed after commit so
a turn, a tool edit or a file's parse never waits for them.

Each queue is a table itself: rows without a vector. A worker in every replica claims a batch with
FOR UPDATE SKIP LOCKED (no two replicas embed the same row), one organization's rows at a time (under
Citus a row lock must stay in one shard), organizations taking turns (db/queue_worker.Rotation). It
embeds the batch outside any transaction and writes the vectors back, only onto rows still under
that claim: a tool edited meanwhile (its claim dropped) keeps waiting for a vector of its new text.
A claim older than CLAIM_TIMEOUT is taken over, so a crash or restart never leaves rows unembedded;
a row failing MAX_ATTEMPTS times is dropped from the queue (it stays findable by full text).
"""

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, String, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.types import TypeEngine

from memvm import metrics
from memvm.db.queue_worker import QueueWorker, Rotation
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.embeddings.registry import EmbedderRegistry
from memvm.orm import file as file_table
from memvm.orm import message as message_table
from memvm.orm import tool as tool_table
from memvm.orm.vector_type import Float4Vector

CLAIM_TIMEOUT_SECONDS = 60
Key = str | int  # a queued row's id
# A claimed row: id, text, claimed_at and organization (None in a shared queue's claim).
Claimed = tuple[Key, str, datetime, str | None]


@dataclass(frozen=True)
class EmbeddingQueue:
    """One table's rows waiting for a vector. `waiting` returns each organization with rows to claim
    and how many of them no one has claimed (the queue's depth). `claim` returns id, text, handle (the
    embedding model; NULL: the default), stored_at and claimed_at of a batch of one organization's
    (`:organization_id`), or of any rows when the table is `shared` (built-in tools have no
    organization; under Citus a reference table, whole on every node)."""

    table: str
    waiting: TextClause
    claim: TextClause
    store: TextClause
    shared: bool


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
    shared: bool = False,
) -> EmbeddingQueue:
    """`handle` and `stored_at` are SQL over the queued row `q`, `key_type` the type of its id.
    `after_store` is a statement over `stored` (the rows just stored, RETURNING *) run as part of
    the store: one statement, so it counts every row stored exactly once, and fails with it."""
    expired = "embed_claimed_at < clock_timestamp() - make_interval(secs => :timeout)"
    claimable = f"{predicate} AND (embed_claimed_at IS NULL OR {expired})"
    # The organization on both sides: the UPDATE finds each row by its primary key, and under Citus
    # both name one shard.
    scope = "" if shared else "{}.organization_id = :organization_id AND"
    # The locked ids are a CTE, run once: as `q.id IN (subquery)` the planner may run the subquery
    # again for each row it joins, and each run locks a further batch (more than :batch claimed).
    claim = text(f"""
        WITH locked AS MATERIALIZED (
            SELECT w.id FROM {table} AS w
            WHERE {scope.format("w")} {claimable}
            ORDER BY w.{order}
            LIMIT :batch
            FOR UPDATE SKIP LOCKED)
        UPDATE {table} AS q
        SET embed_claimed_at = clock_timestamp(), embed_attempts = q.embed_attempts + 1
        FROM locked
        WHERE {scope.format("q")} q.id = locked.id
        RETURNING q.id, q.{text_column}, {handle}, {stored_at}, q.embed_claimed_at
    """)
    # SQL, not an ORM update: a vector is not an edit, so a tool's updated_at stays as it was. One
    # statement for the whole batch, not one per row: asyncpg's executemany waits for its paused
    # writes to resume even once the connection is lost, so a database cut off mid-batch hung the
    # worker for good; a single statement fails with the connection. One per organization, though: under
    # Citus each names one shard. The rows are locked in the order of their ids, as every statement
    # writing several messages locks them (messages/repository._update_in_order): locked in the
    # batch's order, a store and a compaction's eviction of the same messages deadlocked.
    target = f"""
        target AS MATERIALIZED (
            SELECT q.id, v.vector
            FROM {table} AS q JOIN unnest(:keys, :claimed_at, :vectors) AS v(id, claimed_at, vector)
                ON q.id = v.id AND q.embed_claimed_at = v.claimed_at
            WHERE {scope.format("q")} true
            ORDER BY q.id
            FOR NO KEY UPDATE OF q)
    """
    update = f"""
        UPDATE {table} AS q
        SET embedding = t.vector, embedding_model = :model, embedding_dim = :dim, embed_claimed_at = NULL
        FROM target AS t
        WHERE {scope.format("q")} q.id = t.id
    """
    statement = (
        f"WITH {target} {update}" if after_store is None else f"WITH {target}, stored AS ({update} RETURNING q.*) {after_store}"
    )
    store = text(statement).bindparams(
        bindparam("keys", type_=ARRAY(key_type())),
        bindparam("claimed_at", type_=ARRAY(DateTime(timezone=True))),
        bindparam("vectors", type_=ARRAY(Float4Vector(), dimensions=1)),
    )
    # Read on every shard under Citus, without locks; what the rotation and the depth gauge need.
    waiting = text(f"""
        SELECT organization_id, count(*) FILTER (WHERE embed_claimed_at IS NULL)
        FROM {table} WHERE {claimable} GROUP BY organization_id
    """)
    return EmbeddingQueue(table, waiting, claim, store, shared)


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
    WHERE f.organization_id = :organization_id AND f.id = s.file_id AND f.processing_status = 'embedding'
"""

QUEUES = (
    # A message is embedded with its agent's model.
    _queue(
        "message",
        message_table.EMBEDDING_QUEUE_PREDICATE,
        text_column="content",
        handle="(SELECT a.embedding FROM agent AS a WHERE a.organization_id = q.organization_id AND a.id = q.agent_id)",
        order="created_at",
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
        shared=True,
    ),
    # Chunks of folders' files, with their folder's model (a folder stores its embedder's `model`,
    # which is the handle it was made from). A file's progress is counted as its chunks are stored.
    _queue(
        "file_chunk",
        file_table.CHUNK_EMBEDDING_QUEUE_PREDICATE,
        text_column="text",
        handle="(SELECT f.embedding_model FROM folder AS f WHERE f.organization_id = q.organization_id AND f.id = q.folder_id)",
        order="id",  # the order files were parsed in
        # stored: the file's upload
        stored_at="(SELECT f.created_at FROM folder_file AS f WHERE f.organization_id = q.organization_id AND f.id = q.file_id)",
        key_type=BigInteger,
        after_store=_FILE_PROGRESS,
    ),
)


async def embed_pending(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedders: EmbedderRegistry,
    *,
    batch_size: int = 64,
    rotation: Rotation | None = None,
) -> int:
    """Embed one batch of each queue; returns how many rows were claimed (0: the queues are empty).
    `rotation` is the worker's own, kept from batch to batch (without one, the first organization in
    order is served first)."""
    rotation = rotation or Rotation()
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        claimed: list[tuple[EmbeddingQueue, list[Any]]] = []
        depth = 0
        for queue in QUEUES:
            rows, waiting = await _claim(session, queue, rotation, batch_size)
            claimed.append((queue, rows))
            depth += waiting
    metrics.EMBEDDING_DEPTH.set(depth)
    for queue, rows in claimed:
        by_handle: dict[str | None, list[Claimed]] = defaultdict(list)
        for row_id, content, handle, _stored_at, claimed_at, organization in rows:
            by_handle[handle].append((row_id, content, claimed_at, organization))
        for handle, batch in by_handle.items():
            await _embed(sessionmaker, embedders, handle, queue, batch)
    now = datetime.now(UTC)
    stored_at = [row[3] for _, rows in claimed for row in rows]
    for moment in stored_at:
        metrics.EMBEDDING_LAG.observe((now - moment).total_seconds())
    metrics.EMBEDDED.inc(len(stored_at))
    return len(stored_at)


async def _claim(session: AsyncSession, queue: EmbeddingQueue, rotation: Rotation, batch_size: int) -> tuple[list[Any], int]:
    """A batch of the queue's rows, filled organization by organization in the rotation's order, and
    the queue's depth before it (the rows no one had claimed). Each row ends with its organization."""
    waiting = (await session.execute(queue.waiting, {"timeout": CLAIM_TIMEOUT_SECONDS})).all()
    organizations: Sequence[str | None] = (
        ([None] if waiting else [])  # one claim of any organization's rows (built-in tools have none)
        if queue.shared
        else rotation.order(queue.table, (row[0] for row in waiting))
    )
    rows: list[Any] = []
    for organization in organizations:
        if len(rows) == batch_size:
            break
        params = {"timeout": CLAIM_TIMEOUT_SECONDS, "organization_id": organization, "batch": batch_size - len(rows)}
        rows += [(*row, organization) for row in await session.execute(queue.claim, params)]
    return rows, sum(row[1] for row in waiting)


async def _embed(
    sessionmaker: async_sessionmaker[AsyncSession],
    embedders: EmbedderRegistry,
    handle: str | None,
    queue: EmbeddingQueue,
    batch: list[Claimed],
) -> None:
    """Embed the batch in one call, and store the vectors organization by organization."""
    embedder = embedders.for_handle(handle)
    vectors = await embedder.embed([content for _, content, _, _ in batch])
    if len(vectors) != len(batch):  # unnest would pad the shorter array with NULLs
        raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(batch)} texts")
    positions: dict[str | None, list[int]] = defaultdict(list)  # each organization's rows in the batch
    for position, (_, _, _, organization) in enumerate(batch):
        positions[organization].append(position)
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        for organization, rows in positions.items():
            values = {
                "organization_id": organization,
                "keys": [batch[n][0] for n in rows],
                "claimed_at": [batch[n][2] for n in rows],
                "vectors": [vectors[n] for n in rows],
                "model": embedder.model,
                "dim": embedder.dim,
            }
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
        rotation = Rotation()
        super().__init__(
            "embedding", lambda: embed_pending(sessionmaker, embedders, rotation=rotation), wakeup, poll_seconds=poll_seconds
        )

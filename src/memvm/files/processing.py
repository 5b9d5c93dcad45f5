"""The file worker: reads uploaded files into text and chunks, in the background.

An upload waits with status `parsing` and its bytes in `raw`. A worker (in every replica, or in
`memvm worker`) claims an organization's oldest one with FOR UPDATE SKIP LOCKED (under Citus a row
lock must stay in one shard), organizations taking turns (db/queue_worker.Rotation). It reads the
file outside any transaction (a PDF may take minutes, in a child process: parsing/isolation.py), and
stores text and chunks in one transaction, only if its claim still holds. Then the file is
`embedding`: the embedding queue (search/embedding_queue.py) gives its chunks vectors with the
folder's model and counts them, and the file is `completed` when all have one. A file that cannot be
read is `error`, with the reason.

A worker killed mid-file leaves a claim that expires after CLAIM_TIMEOUT_SECONDS; the next worker
takes the file over. One that kills every worker reading it is given up on after MAX_ATTEMPTS.
"""

import asyncio
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Integer, Text, bindparam, delete, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvm.db.queue_worker import QueueWorker, Rotation
from memvm.db.tenancy import ALL_ORGANIZATIONS
from memvm.db.uow import transaction
from memvm.files import repository, views
from memvm.files.chunking import Chunk, chunk_lines, lines_of
from memvm.files.parsing import ParseError, parse_document
from memvm.orm import FileChunk, FolderFile
from memvm.orm.file import CHUNK_EMBEDDING_QUEUE_PREDICATE

# Longer than a parse may take (parsing/isolation.py: 180 s) plus chunking and storing the result.
CLAIM_TIMEOUT_SECONDS = 300
MAX_ATTEMPTS = 3
# A folder's chunk size is in tokens (Letta's embedding_chunk_size); a token is ~3-4 characters.
CHARS_PER_TOKEN = 3

_CLAIMABLE = """processing_status = 'parsing'
    AND (claimed_at IS NULL OR claimed_at < clock_timestamp() - make_interval(secs => :timeout))"""
# Read on every shard under Citus, without locks: whose files the rotation takes turns among.
_WAITING = text(f"SELECT DISTINCT organization_id FROM folder_file WHERE {_CLAIMABLE}")
_CLAIM = text(f"""
    UPDATE folder_file AS f
    SET claimed_at = clock_timestamp(), attempts = f.attempts + 1
    WHERE f.organization_id = :organization_id AND f.id = (
        SELECT w.id FROM folder_file AS w
        WHERE w.organization_id = :organization_id AND {_CLAIMABLE}
        ORDER BY w.created_at
        LIMIT 1
        FOR UPDATE SKIP LOCKED)
    RETURNING f.id, f.folder_id, f.organization_id, f.claimed_at, f.attempts, f.file_type, f.raw,
              (SELECT d.chunk_size FROM folder AS d WHERE d.organization_id = f.organization_id AND d.id = f.folder_id)
""")
# One statement for all of a file's chunks, however many (asyncpg's executemany is one round trip a row).
_INSERT_CHUNKS = text("""
    INSERT INTO file_chunk (organization_id, file_id, folder_id, seq, start_line, end_line, text)
    SELECT :organization_id, :file_id, :folder_id, c.seq, c.start_line, c.end_line, c.text
    FROM unnest(:seqs, :starts, :ends, :texts) AS c(seq, start_line, end_line, text)
""").bindparams(
    bindparam("seqs", type_=ARRAY(Integer())),
    bindparam("starts", type_=ARRAY(Integer())),
    bindparam("ends", type_=ARRAY(Integer())),
    bindparam("texts", type_=ARRAY(Text())),
)
# Files whose chunks the embedding queue has given up on (each failed its attempts; a claim this old
# is no longer in progress) would wait in `embedding` for good: they end as `error`.
_GIVE_UP = text(f"""
    UPDATE folder_file AS f
    SET processing_status = 'error',
        error_message = (f.total_chunks - f.chunks_embedded) || ' of ' || f.total_chunks
                        || ' chunks could not be embedded: the embedding model failed on them repeatedly.',
        updated_at = clock_timestamp()
    WHERE f.processing_status = 'embedding'
      AND NOT EXISTS (
        SELECT 1 FROM file_chunk AS c
        WHERE c.organization_id = f.organization_id AND c.file_id = f.id AND c.embedding IS NULL
          AND (({CHUNK_EMBEDDING_QUEUE_PREDICATE}) OR c.embed_claimed_at > clock_timestamp() - interval '10 minutes'))
""")


@dataclass(frozen=True)
class Claim:
    file_id: str
    folder_id: str
    organization_id: str
    claimed_at: datetime  # the claim holds while the row still carries it
    attempts: int
    media_type: str
    raw: bytes | None
    chunk_size: int


@dataclass(frozen=True)
class Parsed:
    text: str
    line_count: int
    chunks: list[Chunk]


@dataclass(frozen=True)
class Failed:
    reason: str


async def process_next(sessionmaker: async_sessionmaker[AsyncSession], rotation: Rotation | None = None) -> int:
    """Read the oldest waiting file of the organization whose turn it is (`rotation`: the worker's own,
    kept from file to file; without one, the first organization in order); 1 if there was one, 0 if
    none waits."""
    claim = await _claim(sessionmaker, rotation or Rotation())
    if claim is None:
        async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
            await session.execute(_GIVE_UP)
        return 0
    if claim.attempts > MAX_ATTEMPTS:
        outcome: Parsed | Failed = Failed(f"processing was interrupted {MAX_ATTEMPTS} times; upload the file again.")
    else:
        outcome = await asyncio.to_thread(read, claim)
    await _store(sessionmaker, claim, outcome)
    return 1


async def _claim(sessionmaker: async_sessionmaker[AsyncSession], rotation: Rotation) -> Claim | None:
    """The first organization in turn whose oldest file no other worker holds."""
    async with transaction(sessionmaker, ALL_ORGANIZATIONS) as session:
        waiting = (await session.scalars(_WAITING, {"timeout": CLAIM_TIMEOUT_SECONDS})).all()
        for organization_id in rotation.order("folder_file", waiting):
            params = {"timeout": CLAIM_TIMEOUT_SECONDS, "organization_id": organization_id}
            if row := (await session.execute(_CLAIM, params)).first():
                return Claim(*row)
    return None


def read(claim: Claim) -> Parsed | Failed:
    """The file's text and chunks, or why it has none. Blocking: run in a thread."""
    if claim.raw is None:
        return Failed("the uploaded bytes are gone; upload the file again.")
    try:
        content = parse_document(claim.raw, claim.media_type)
    except ParseError as error:
        return Failed(error.reason)
    return chunked(content, claim.chunk_size)


def chunked(content: str, chunk_size: int) -> Parsed | Failed:
    """A file's text cut into chunks of a folder's `chunk_size` (tokens), or why there is nothing to
    search. Blocking for a long text: run in a thread."""
    chunks = chunk_lines(content, chunk_size * CHARS_PER_TOKEN)
    if not chunks:
        return Failed("no text was found in the file.")
    return Parsed(content, len(lines_of(content)), chunks)


async def _store(sessionmaker: async_sessionmaker[AsyncSession], claim: Claim, outcome: Parsed | Failed) -> None:
    """Store what the read found, if the file is still ours: not deleted, not taken over. Its folder
    is locked first (the lock order of service.py): an attach of the folder waits for this, or this
    for it, so the agent gets a view of the file whichever commits first."""
    async with transaction(sessionmaker, claim.organization_id) as session:
        if not await repository.lock_folder_for_files(session, claim.folder_id):
            return
        query = select(FolderFile).where(
            FolderFile.id == claim.file_id,
            FolderFile.claimed_at == claim.claimed_at,
            FolderFile.processing_status == "parsing",
        )
        file = await session.scalar(query.with_for_update())
        if file is None:
            return
        await store(session, file, outcome)
        if isinstance(outcome, Parsed):
            await views.show_new_file(session, file)


async def store(session: AsyncSession, file: FolderFile, outcome: Parsed | Failed) -> None:
    """Record what reading the file found: its text and chunks (status `embedding`: the embedding
    queue takes it from there), or why it has none (`error`). Agents' views are the caller's."""
    file.raw = None
    file.claimed_at = None
    if isinstance(outcome, Failed):
        file.processing_status, file.error_message = "error", outcome.reason
        await session.flush()
        return
    await _replace_chunks(session, file, outcome.chunks)
    file.content, file.line_count = outcome.text, outcome.line_count
    file.total_chunks, file.chunks_embedded = len(outcome.chunks), 0
    file.processing_status = "embedding"
    await session.flush()


async def _replace_chunks(session: AsyncSession, file: FolderFile, chunks: list[Chunk]) -> None:
    await session.execute(delete(FileChunk).where(FileChunk.file_id == file.id))
    values = {
        "organization_id": file.organization_id,
        "file_id": file.id,
        "folder_id": file.folder_id,
        "seqs": [chunk.seq for chunk in chunks],
        "starts": [chunk.start_line for chunk in chunks],
        "ends": [chunk.end_line for chunk in chunks],
        "texts": [chunk.text for chunk in chunks],
    }
    await session.execute(_INSERT_CHUNKS, values)


class FileWorker(QueueWorker):
    """Reads waiting files one at a time, woken by an upload in this process; wakes the embedding
    worker (`embedding_wakeup`) when a file's chunks are stored."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        wakeup: asyncio.Event,
        *,
        embedding_wakeup: asyncio.Event,
        poll_seconds: float,
    ) -> None:
        rotation = Rotation()

        async def drain() -> int:
            taken = await process_next(sessionmaker, rotation)
            if taken:
                embedding_wakeup.set()
            return taken

        super().__init__("file processing", drain, wakeup, poll_seconds=poll_seconds)

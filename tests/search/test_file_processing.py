"""Uploaded files through the background: parsed into chunks by the file worker, the chunks embedded
by the embedding queue, with the file's status and progress along the way; and both resuming the
work of a worker that died mid-file."""

import asyncio

import pytest

from memvm.db.queue_worker import Rotation
from memvm.embeddings.registry import EmbedderRegistry
from memvm.files import processing
from memvm.files.processing import Parsed, process_next
from memvm.search.embedding_queue import embed_pending
from tests.support.api import app_client

# Five lines of 20 characters: with a chunk size of 10 tokens (30 characters), one chunk a line.
FIVE_LINES = b"".join(b"line %d of the file\n" % n for n in range(1, 6)) + b"\n"


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"embedding_worker": False})  # the tests drive the workers


async def folder_with_file(client, data=FIVE_LINES, filename="notes.txt") -> tuple[str, str]:
    created = await client.post("/v1/folders/", json={"name": "docs", "embedding_chunk_size": 10})
    assert created.status_code == 200, created.text
    folder_id = created.json()["id"]
    uploaded = await client.post(f"/v1/folders/{folder_id}/upload", files={"file": (filename, data, "text/plain")})
    assert uploaded.status_code == 200, uploaded.text
    return folder_id, uploaded.json()["id"]


async def state(client, folder_id, file_id) -> tuple:
    file = (await client.get(f"/v1/folders/{folder_id}/files/{file_id}")).json()
    return file["processing_status"], file["total_chunks"], file["chunks_embedded"], file["error_message"]


async def test_a_file_goes_from_parsing_through_embedding_to_completed(client, db, sessionmaker):
    folder_id, file_id = await folder_with_file(client)
    seen = [await state(client, folder_id, file_id)]

    assert await process_next(sessionmaker) == 1
    seen.append(await state(client, folder_id, file_id))
    while await embed_pending(sessionmaker, EmbedderRegistry(), batch_size=2):
        seen.append(await state(client, folder_id, file_id))

    assert seen == [
        ("parsing", None, None, None),
        ("embedding", 5, 0, None),
        ("embedding", 5, 2, None),
        ("embedding", 5, 4, None),
        ("completed", 5, 5, None),
    ]
    chunks = await db.fetch("SELECT seq, start_line, end_line, text, embedding_model, embedding_dim FROM file_chunk ORDER BY seq")
    model = ("local/all-MiniLM-L6-v2", 384)  # the folder's
    assert [tuple(chunk) for chunk in chunks] == [
        *((n - 1, n, n, f"line {n} of the file", *model) for n in range(1, 5)),
        (4, 5, 6, "line 5 of the file\n", *model),  # the blank last line goes with the one before
    ]
    file = await db.fetchrow("SELECT raw, content, line_count, claimed_at FROM folder_file")
    assert (file["raw"], file["content"], file["line_count"], file["claimed_at"]) == (None, FIVE_LINES.decode(), 6, None)
    assert await process_next(sessionmaker) == 0


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"text\x00binary", "the file has a NUL character on line 1"),
        (b"", "no text was found in the file."),
        (b"\n  \n\t\n", "no text was found in the file."),
    ],
)
async def test_a_file_that_cannot_be_read_ends_as_error_with_the_reason(client, db, sessionmaker, data, reason):
    folder_id, file_id = await folder_with_file(client, data)

    assert await process_next(sessionmaker) == 1

    status, total, embedded, message = await state(client, folder_id, file_id)
    assert (status, total, embedded) == ("error", None, None) and message.startswith(reason)
    assert await db.fetchval("SELECT raw FROM folder_file") is None
    assert await db.fetchval("SELECT count(*) FROM file_chunk") == 0


async def test_a_dead_workers_file_is_taken_over_once_its_claim_expires(client, db, sessionmaker):
    folder_id, file_id = await folder_with_file(client)
    dead = await processing._claim(sessionmaker, Rotation())  # claimed, then the worker hung
    assert dead is not None and dead.file_id == file_id

    assert await process_next(sessionmaker) == 0  # a fresh claim is left alone
    await db.execute("UPDATE folder_file SET claimed_at = claimed_at - interval '1 hour'")
    live = await processing._claim(sessionmaker, Rotation())
    assert live is not None and live.file_id == file_id
    # The hung worker comes back with its parse while the new one still reads: its claim no longer holds.
    await processing._store(sessionmaker, dead, Parsed("stale text", 1, []))
    assert await state(client, folder_id, file_id) == ("parsing", None, None, None)
    await processing._store(sessionmaker, live, processing.read(live))

    assert await state(client, folder_id, file_id) == ("embedding", 5, 0, None)
    assert await db.fetchval("SELECT attempts FROM folder_file") == 2
    assert await db.fetchval("SELECT count(*) FROM file_chunk") == 5


async def test_a_file_that_keeps_killing_its_worker_is_given_up(client, db, sessionmaker):
    folder_id, file_id = await folder_with_file(client)
    await db.execute("UPDATE folder_file SET attempts = 3, claimed_at = now() - interval '1 hour'")

    assert await process_next(sessionmaker) == 1

    status, _, _, message = await state(client, folder_id, file_id)
    assert (status, message) == ("error", "processing was interrupted 3 times; upload the file again.")


class DiesMidBatch:
    """The first batch's worker dies while embedding (its claim stays); the second time it is still
    embedding when its claim expires, another worker stores those rows first, then it stores."""

    def __init__(self, sessionmaker, db):
        self.sessionmaker, self.db, self.calls = sessionmaker, db, 0
        self.real = EmbedderRegistry()

    def for_handle(self, handle):
        return self

    @property
    def model(self):
        return self.real.for_handle(None).model

    @property
    def dim(self):
        return self.real.for_handle(None).dim

    async def embed(self, texts):
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("the worker died")
        await self.db.execute("UPDATE file_chunk SET embed_claimed_at = embed_claimed_at - interval '1 hour'")
        assert await embed_pending(self.sessionmaker, self.real, batch_size=len(texts)) == len(texts)
        return await self.real.for_handle(None).embed(texts)


async def test_chunks_of_a_dead_embedding_worker_are_embedded_and_counted_once(client, db, sessionmaker):
    folder_id, file_id = await folder_with_file(client)
    assert await process_next(sessionmaker) == 1
    dying = DiesMidBatch(sessionmaker, db)

    with pytest.raises(ConnectionError):
        await embed_pending(sessionmaker, dying, batch_size=2)
    assert await state(client, folder_id, file_id) == ("embedding", 5, 0, None)
    await db.execute("UPDATE file_chunk SET embed_claimed_at = embed_claimed_at - interval '1 hour'")
    assert await embed_pending(sessionmaker, dying, batch_size=2) == 2
    assert await state(client, folder_id, file_id) == ("embedding", 5, 2, None)  # the late store counted nothing
    while await embed_pending(sessionmaker, EmbedderRegistry(), batch_size=2):
        pass

    assert await state(client, folder_id, file_id) == ("completed", 5, 5, None)
    assert await db.fetchval("SELECT count(*) FROM file_chunk WHERE embedding IS NOT NULL") == 5


async def test_a_file_whose_chunks_cannot_be_embedded_ends_as_error(client, db, sessionmaker):
    folder_id, file_id = await folder_with_file(client)
    assert await process_next(sessionmaker) == 1
    assert await embed_pending(sessionmaker, EmbedderRegistry(), batch_size=3) == 3
    # The other two failed every attempt; their last claim is long over.
    await db.execute(
        "UPDATE file_chunk SET embed_attempts = 5, embed_claimed_at = now() - interval '1 hour' WHERE embedding IS NULL"
    )

    assert await process_next(sessionmaker) == 0  # nothing to parse: it looks for files stuck embedding

    status, total, embedded, message = await state(client, folder_id, file_id)
    assert (status, total, embedded) == ("error", 5, 3)
    assert message == "2 of 5 chunks could not be embedded: the embedding model failed on them repeatedly."


async def test_the_app_parses_and_embeds_an_upload_in_the_background(settings):
    async with app_client(settings.model_copy(update={"embedding_worker": True, "embedding_poll_seconds": 30})) as client:
        folder_id, file_id = await folder_with_file(client)  # woken by the upload, not by a poll
        async with asyncio.timeout(20):
            while (await state(client, folder_id, file_id))[0] != "completed":
                await asyncio.sleep(0.05)
        assert await state(client, folder_id, file_id) == ("completed", 5, 5, None)


async def test_chunks_are_embedded_with_their_folders_model(client, db, sessionmaker, settings, llm):
    created = await client.post("/v1/folders/", json={"name": "remote", "embedding": "openai/text-embedding-3-small"})
    folder_id = created.json()["id"]
    files = {"file": ("a.txt", b"about the garden\n", "text/plain")}
    file_id = (await client.post(f"/v1/folders/{folder_id}/upload", files=files)).json()["id"]
    assert await process_next(sessionmaker) == 1

    embedders = EmbedderRegistry.from_settings(settings)
    assert await embed_pending(sessionmaker, embedders) == 1
    await embedders.aclose()

    assert await state(client, folder_id, file_id) == ("completed", 1, 1, None)
    assert [request["model"] for request in llm.embedding_requests] == ["text-embedding-3-small"]
    chunk = await db.fetchrow("SELECT embedding_model, embedding_dim FROM file_chunk")
    assert tuple(chunk) == ("openai/text-embedding-3-small", 1536)

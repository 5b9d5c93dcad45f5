"""The message embedding queue: shared by workers without double work, crash-safe, and fair to
organizations; its claims lock one organization's rows at a time."""

import asyncio
import contextlib
import re

from sqlalchemy import event

from memvm.actors import DEFAULT_ORGANIZATION_ID
from memvm.config import Settings
from memvm.db.engine import build_engine, build_sessionmaker
from memvm.db.queue_worker import Rotation
from memvm.embeddings.registry import EmbedderRegistry
from memvm.files.processing import process_next
from memvm.ids import new_id
from memvm.search.embedding_queue import EmbeddingWorker, embed_pending
from tests.db.test_citus_ready import REFERENCE_TABLES, TENANT_KEY
from tests.db.test_tenant_writes import recorded_statements, unscoped
from tests.search.test_file_processing import folder_with_file
from tests.support.api import app_client, create_agent
from tests.support.pg import next_seq


async def add_agent_with_messages(db, count, embedding=None, organization_id=DEFAULT_ORGANIZATION_ID):
    agent_id = new_id("agent")
    await db.execute(
        "INSERT INTO agent (id, name, agent_type, system, memory_render_mode, tags, metadata, timezone, compiled_system,"
        " embedding, organization_id) VALUES ($1, 'a', 'letta_v1_agent', 's', 'standard', '{}', '{}', 'UTC', '', $2, $3)",
        agent_id,
        embedding,
        organization_id,
    )
    await add_messages(db, agent_id, [new_id("message") for _ in range(count)], organization_id)
    return agent_id


async def add_messages(db, agent_id, ids, organization_id=DEFAULT_ORGANIZATION_ID):
    """Messages of the agent's default conversation, waiting for a vector, stored in the order of `ids`."""
    for n, message_id in enumerate(ids):
        await db.execute(
            "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts, organization_id, seq)"
            f" VALUES ($1, $2, 'user', 'message', $3, true, 0, $4, {next_seq('$2')})",
            message_id,
            agent_id,
            f"note {n} about cats",
            organization_id,
        )


async def add_organization(db, name):
    organization_id = new_id("org")
    await db.execute("INSERT INTO organization (id, name) VALUES ($1, $2)", organization_id, name)
    return organization_id


async def test_concurrent_workers_embed_every_message_exactly_once(db, sessionmaker):
    await add_agent_with_messages(db, 40)
    registry = EmbedderRegistry()

    claimed = await asyncio.gather(*(embed_pending(sessionmaker, registry, batch_size=8) for _ in range(6)))
    while more := await embed_pending(sessionmaker, registry, batch_size=8):
        claimed.append(more)

    assert sum(claimed) == 40  # SKIP LOCKED: no row was claimed twice
    rows = await db.fetch("SELECT embed_attempts, embedding_dim, embed_claimed_at FROM message")
    assert all(r["embed_attempts"] == 1 and r["embedding_dim"] == 384 and r["embed_claimed_at"] is None for r in rows)


async def test_organizations_take_turns_so_one_tenants_backlog_does_not_hold_up_another(db, sessionmaker):
    await add_agent_with_messages(db, 30)  # queued first
    other = await add_organization(db, "other")
    await add_agent_with_messages(db, 2, organization_id=other)
    rotation, registry = Rotation(), EmbedderRegistry()

    first_two = [await embed_pending(sessionmaker, registry, batch_size=8, rotation=rotation) for _ in range(2)]
    waiting = await db.fetch("SELECT organization_id, count(*) FROM message WHERE embedding IS NULL GROUP BY 1")
    while await embed_pending(sessionmaker, registry, batch_size=8, rotation=rotation):
        pass

    # Whichever organization went first, the other's turn came in the second batch; the backlog filled
    # the rest of both batches.
    assert first_two == [8, 8]
    assert [tuple(row) for row in waiting] == [(DEFAULT_ORGANIZATION_ID, 16)]
    rows = await db.fetch("SELECT embed_attempts, embedding_dim FROM message")
    assert len(rows) == 32 and all(tuple(row) == (1, 384) for row in rows)


async def test_the_workers_claim_and_store_rows_of_one_organization_at_a_time(settings, db, sessionmaker):
    """Citus runs SELECT ... FOR UPDATE only on one shard, i.e. with the organization named
    (docs/scale-out.md): every statement with which the file worker and the embedding queue lock rows,
    and every store of vectors, names the organization of each tenant table it touches (the shared
    tool table aside)."""
    columns = await db.fetch("SELECT table_name FROM information_schema.columns WHERE column_name = $1", TENANT_KEY)
    tenant_tables = {row["table_name"] for row in columns} - REFERENCE_TABLES.keys()
    await add_agent_with_messages(db, 3)
    await add_agent_with_messages(db, 3, organization_id=await add_organization(db, "other"))
    async with app_client(settings.model_copy(update={"embedding_worker": False})) as client:
        await folder_with_file(client)

    with recorded_statements() as statements:
        while await process_next(sessionmaker):
            pass
        while await embed_pending(sessionmaker, EmbedderRegistry()):
            pass

    claims = [s for s in statements if re.search(r"\bFOR\s+UPDATE\b", s, re.IGNORECASE)]
    stores = [s for s in statements if "SET embedding = " in s]
    claimed = {table for table in tenant_tables for s in claims if re.search(rf"\bFROM\s+{table}\b", s)}
    stored = {table for table in tenant_tables for s in stores if re.search(rf"\bUPDATE\s+{table}\b", s)}
    assert ({"folder_file", "message", "file_chunk"} <= claimed, {"message", "file_chunk"} <= stored) == (True, True)
    assert [(s, tables) for s in claims + stores if (tables := unscoped(s, tenant_tables))] == []
    assert await db.fetchval("SELECT count(*) FROM message WHERE embedding IS NULL") == 0


async def test_a_stale_claim_is_taken_over_but_a_fresh_one_is_not(db, sessionmaker):
    await add_agent_with_messages(db, 2)
    await db.execute(
        "UPDATE message SET embed_claimed_at = now() - interval '10 minutes', embed_attempts = 1"
        " WHERE id = (SELECT min(id) FROM message)"
    )
    await db.execute("UPDATE message SET embed_claimed_at = now(), embed_attempts = 1 WHERE id = (SELECT max(id) FROM message)")

    claimed = await embed_pending(sessionmaker, EmbedderRegistry())

    assert claimed == 1
    assert await db.fetchval("SELECT count(*) FROM message WHERE embedding IS NULL") == 1


async def test_rows_failing_too_often_leave_the_queue(db, sessionmaker):
    await add_agent_with_messages(db, 1)
    await db.execute("UPDATE message SET embed_attempts = 5")

    assert await embed_pending(sessionmaker, EmbedderRegistry()) == 0


async def test_changing_the_embedding_model_requeues_messages_and_refuses_mismatched_archives(settings, llm, db):
    async with app_client(settings.model_copy(update={"embedding_worker": False})) as client:
        agent = await create_agent(client)
        await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": "a local-model passage"})
        await db.execute(
            "INSERT INTO message (id, agent_id, role, kind, content, in_context, embed_attempts,"
            " embedding, embedding_model, embedding_dim, organization_id, seq)"
            " VALUES ($1, $2, 'user', 'message', 'hello', true, 1,"
            " array_fill(0.1, ARRAY[384])::vector, 'local/all-MiniLM-L6-v2', 384,"
            f" '{DEFAULT_ORGANIZATION_ID}', {next_seq('$2')})",
            new_id("message"),
            agent["id"],
        )

        refused = await client.patch(f"/v1/agents/{agent['id']}", json={"embedding": "openai/text-embedding-3-small"})
        archive_id = (await client.get("/v1/archives/", params={"agent_id": agent["id"]})).json()[0]["id"]
        await client.patch(f"/v1/agents/{agent['id']}/archives/detach/{archive_id}")
        accepted = await client.patch(f"/v1/agents/{agent['id']}", json={"embedding": "openai/text-embedding-3-small"})
        context = (await client.get(f"/v1/agents/{agent['id']}/context")).json()

    assert refused.status_code == 409 and archive_id in refused.json()["detail"]
    assert accepted.status_code == 200 and accepted.json()["embedding"] == "openai/text-embedding-3-small"
    assert context["num_messages_pending_embedding"] == 1
    assert await db.fetchval("SELECT count(*) FROM message WHERE embedding IS NULL AND embed_attempts = 0") == 1


class StallingEmbedder:
    """Embeds instantly, in OpenAI's largest size (64 vectors of 3,072 float4s: a batch write of 786 kB,
    more than the relay, the socket and the transport's high-water mark take in), and then makes the
    relay stall a little way into what is sent next: the batch write."""

    model, dim = "openai/text-embedding-3-large", 3072

    def __init__(self, proxy):
        self.proxy, self.stalled = proxy, False

    def for_handle(self, handle):
        return self

    async def embed(self, texts):
        if not self.stalled:
            self.stalled = True
            self.proxy.hold_client_writes(after_bytes=65536)
        return [[(n + 1) / self.dim] * self.dim for n in range(len(texts))]


def writes_paused(transport) -> bool:
    """asyncio pauses a protocol's writing while its transport holds more than the high-water mark."""
    return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]


async def test_a_batch_write_cut_off_while_paused_fails_and_the_worker_embeds_once_the_database_is_back(proxy, db):
    """asyncpg's executemany waited for its paused writes to resume on a connection already lost, which
    they never do: one outage at that moment stopped the worker's embedding for good."""
    await add_agent_with_messages(db, 64)
    engine = build_engine(proxy.url, Settings())
    transports = []
    event.listen(engine.sync_engine, "connect", lambda dbapi, _: transports.append(dbapi.driver_connection._transport))
    worker = EmbeddingWorker(build_sessionmaker(engine), StallingEmbedder(proxy), asyncio.Event(), poll_seconds=0.05)
    worker.start()
    try:
        async with asyncio.timeout(10):
            while not any(writes_paused(transport) for transport in transports):
                await asyncio.sleep(0.01)
        await proxy.stop()  # the database goes away mid-write
        await proxy.start()
        # The cut-off batch's claim expires (CLAIM_TIMEOUT_SECONDS), so the worker takes the rows again.
        await db.execute("UPDATE message SET embed_claimed_at = embed_claimed_at - interval '1 hour'")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                while await db.fetchval("SELECT count(*) FROM message WHERE embedding IS NULL"):
                    await asyncio.sleep(0.05)
        dims = await db.fetch("SELECT embedding_dim, count(*) FROM message GROUP BY 1")
    finally:
        await worker.stop(grace_seconds=1)  # a hung batch write is cancelled
        await engine.dispose()

    assert [tuple(row) for row in dims] == [(3072, 64)]

"""An archive's passage count and tag counts, kept with its passages, give every prompt what counting
and unnesting the passages themselves gives, whatever inserts, deletes and detaches come first."""

import asyncio
import random

from memvm.actors import DEFAULT_ORGANIZATION_ID, Actor
from memvm.archives import service as archives
from memvm.archives.schemas import ArchiveCreate, PassageCreate
from memvm.db.uow import transaction
from memvm.embeddings.ports import EmbeddingModel
from memvm.prompts.service import recompiles_at_end
from tests.support.api import compiled_prompt, create_agent
from tests.support.pg import until_waiting

# What the prompt read before the counts were kept: every passage of the agent's archives.
SCANNED = """
WITH read AS (SELECT archive_id FROM agent_archive WHERE agent_id = $1)
SELECT (SELECT count(*) FROM passage WHERE archive_id IN (SELECT archive_id FROM read)) AS passages,
       ARRAY(SELECT DISTINCT unnest(tags) AS tag FROM passage WHERE archive_id IN (SELECT archive_id FROM read)
             ORDER BY tag LIMIT 100) AS tags
"""
KEPT_TAGS = "SELECT organization_id, archive_id, tag, passages FROM archive_tag ORDER BY 1, 2, 3"
COUNTED_TAGS = (
    "SELECT organization_id, archive_id, tag, count(*) FROM passage, unnest(tags) AS tag GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
KEPT_COUNTS = "SELECT id, passage_count FROM archive ORDER BY id"
COUNTED = "SELECT id, (SELECT count(*) FROM passage WHERE archive_id = archive.id) FROM archive ORDER BY id"
TAG_POOL = [f"topic-{n:03}" for n in range(130)]  # more than the prompt lists


def random_passages(rng: random.Random, count: int) -> list[dict]:
    return [{"text": f"note {rng.random()}", "tags": rng.sample(TAG_POOL, rng.randint(0, 6))} for _ in range(count)]


async def metadata_of(client, db, agent_id: str) -> tuple[int, list[str]]:
    """The passage count and tags the agent's stored prompt shows, checked against a dry run."""
    stored = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent_id)
    assert stored == await compiled_prompt(client, agent_id)
    lines = stored.splitlines()
    count = next((int(line.split()[1]) for line in lines if "total memories you created" in line), 0)
    tags = next((line.split(": ", 1)[1].split(", ") for line in lines if "archival memory tags:" in line), [])
    return count, tags


async def assert_counts_match_a_scan(client, db, agent_ids: list[str]) -> None:
    assert [tuple(row) for row in await db.fetch(KEPT_TAGS)] == [tuple(row) for row in await db.fetch(COUNTED_TAGS)]
    assert [tuple(row) for row in await db.fetch(KEPT_COUNTS)] == [tuple(row) for row in await db.fetch(COUNTED)]
    for agent_id in agent_ids:
        scanned = await db.fetchrow(SCANNED, agent_id)
        assert await metadata_of(client, db, agent_id) == (scanned["passages"], scanned["tags"])


async def test_prompts_show_what_a_scan_of_the_passages_shows(client, db):
    rng = random.Random(30)
    one, two = (await create_agent(client))["id"], (await create_agent(client))["id"]
    shared = (await client.post("/v1/archives/", json={"name": "team"})).json()["id"]
    for agent_id in (one, two):
        assert (await client.patch(f"/v1/agents/{agent_id}/archives/attach/{shared}")).status_code == 200
    batch = await client.post(f"/v1/archives/{shared}/passages/batch", json={"passages": random_passages(rng, 40)})
    own = [
        (await client.post(f"/v1/agents/{one}/archival-memory", json=passage)).json()[0] for passage in random_passages(rng, 6)
    ]
    await assert_counts_match_a_scan(client, db, [one, two])

    for passage in rng.sample(batch.json(), 25):
        assert (await client.delete(f"/v1/archives/{shared}/passages/{passage['id']}")).status_code == 204
    for passage in own[:3]:
        assert (await client.delete(f"/v1/agents/{one}/archival-memory/{passage['id']}")).status_code == 200
    await assert_counts_match_a_scan(client, db, [one, two])

    await client.post(f"/v1/archives/{shared}/passages", json={"text": "retagged", "tags": ["topic-000", "fresh"]})
    assert (await client.patch(f"/v1/agents/{two}/archives/detach/{shared}")).status_code == 200
    await assert_counts_match_a_scan(client, db, [one, two])
    assert (await client.delete(f"/v1/archives/{shared}")).status_code == 204
    await assert_counts_match_a_scan(client, db, [one, two])
    assert await db.fetchval("SELECT count(*) FROM archive_tag WHERE archive_id = $1", shared) == 0


MODEL = EmbeddingModel("local/test", 3)


async def insert_tagged(session, archive_id: str, tag: str) -> None:
    archive = await archives.get_archive(session, archive_id)
    item = (PassageCreate(text=f"about {tag}", tags=[tag]), [1.0, 0.0, 0.0])
    await archives.insert_passages(session, archive, [item], model=MODEL, writer=Actor("local"))


async def second_writer_while_first_is_open(sessionmaker, db, first, archive_id: str) -> None:
    """`first(session)` runs in a transaction that stays open until a second one, inserting a passage
    tagged "new" into the same archive, waits on it; then both commit."""
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await first(session)
        second = asyncio.create_task(_insert_alone(sessionmaker, archive_id))
        await until_waiting(db, second)
        assert not second.done()
    await second


async def _insert_alone(sessionmaker, archive_id: str) -> None:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await insert_tagged(session, archive_id, "new")


async def new_archive(sessionmaker) -> str:
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        return (await archives.create_archive(session, ArchiveCreate(name="concurrent"), MODEL)).id


async def test_two_transactions_adding_one_new_tag_to_an_archive_both_count(sessionmaker, db):
    archive_id = await new_archive(sessionmaker)

    await second_writer_while_first_is_open(sessionmaker, db, lambda s: insert_tagged(s, archive_id, "new"), archive_id)

    assert [tuple(row) for row in await db.fetch("SELECT tag, passages FROM archive_tag")] == [("new", 2)]
    assert await db.fetchval("SELECT passage_count FROM archive") == 2


async def test_a_tag_deleted_to_zero_while_another_transaction_adds_it_counts_once(sessionmaker, db):
    archive_id = await new_archive(sessionmaker)
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session:
        await insert_tagged(session, archive_id, "new")
    passage_id = await db.fetchval("SELECT id FROM passage")

    async def delete_it(session):
        await archives.delete_archive_passages(session, archive_id, [passage_id])

    await second_writer_while_first_is_open(sessionmaker, db, delete_it, archive_id)

    assert [tuple(row) for row in await db.fetch("SELECT tag, passages FROM archive_tag")] == [("new", 1)]
    assert await db.fetchval("SELECT passage_count FROM archive") == 1


async def test_inside_a_turn_an_insert_locks_no_other_reader_before_the_steps_end(sessionmaker, db, client):
    """A step locks the agents whose prompts it changed at its end, after the blocks it locked
    (recompiles_at_end); an insert into a shared archive mid-step must not take the other readers then."""
    archive_id = await new_archive(sessionmaker)
    readers = [(await create_agent(client))["id"] for _ in range(2)]
    for agent_id in readers:
        await db.execute(
            "INSERT INTO agent_archive (organization_id, agent_id, archive_id) VALUES ($1, $2, $3)",
            DEFAULT_ORGANIZATION_ID,
            agent_id,
            archive_id,
        )
    holder = db.transaction()
    await holder.start()
    await db.execute("SELECT 1 FROM agent WHERE id = $1 FOR NO KEY UPDATE", readers[1])  # another turn holds it
    async with transaction(sessionmaker, DEFAULT_ORGANIZATION_ID) as session, recompiles_at_end(session):
        try:
            await asyncio.wait_for(insert_tagged(session, archive_id, "mid-step"), timeout=5)
        finally:
            await holder.rollback()  # the other turn ends; the step's end then recompiles both
    for agent_id in readers:
        assert "mid-step" in await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent_id)

"""A write racing the delete of the archive it goes to waits for the delete, then does what it would
have done after it: an agent's insert makes the agent a new default archive; an insert into the archive
by id, a delete of one of its passages and a new link of it to an agent are 404s. None fails on a
foreign key (a 500), nor deadlocks with the delete's cascade (a 409)."""

import asyncio

from tests.support.api import create_agent
from tests.support.pg import until_waiting


async def insert_while_deleted(client, db, path: str) -> tuple[object, str, str]:
    """An agent with one passage in its default archive; a POST of a second to `path` (formatted with
    the agent's and the archive's ids), which waits while the archive is deleted as DELETE
    /v1/archives/{id} deletes it (the archive, then its readers, locked first). The response, the
    agent's id and the deleted archive's."""
    agent_id = (await create_agent(client))["id"]
    first = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": "first"})
    assert first.status_code == 200, first.text
    archive_id = first.json()[0]["archive_id"]
    url = path.format(agent=agent_id, archive=archive_id)
    async with db.transaction():
        await db.execute("SELECT 1 FROM archive WHERE id = $1 FOR UPDATE", archive_id)
        await db.execute("SELECT 1 FROM agent WHERE id = $1 FOR NO KEY UPDATE", agent_id)
        insert = asyncio.create_task(client.post(url, json={"text": "second"}))  # once the locks are held
        await until_waiting(db, insert)
        await db.execute("DELETE FROM archive WHERE id = $1", archive_id)
    return await asyncio.wait_for(insert, 30), agent_id, archive_id


async def test_an_agents_insert_after_its_archive_is_deleted_makes_a_new_one(client, db):
    response, agent_id, archive_id = await insert_while_deleted(client, db, "/v1/agents/{agent}/archival-memory")

    assert response.status_code == 200, response.text
    new_archive = response.json()[0]["archive_id"]
    assert new_archive != archive_id
    assert await db.fetchval("SELECT default_archive_id FROM agent WHERE id = $1", agent_id) == new_archive
    assert await db.fetchval("SELECT count(*) FROM passage") == 1


async def test_an_insert_into_an_archive_deleted_meanwhile_is_not_found(client, db):
    response, _, archive_id = await insert_while_deleted(client, db, "/v1/archives/{archive}/passages")

    assert response.status_code == 404, response.text
    assert archive_id in response.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM passage") == 0


async def write_while_a_reader_holds_the_delete(client, db, method: str, path: str) -> list:
    """DELETE /v1/archives/{id} of an agent's default archive, held (with the archive locked) while a
    recompile holds its reader; then the request of `method` and `path` (formatted with the archive's
    id, its one passage's id, and another agent's id), once it waits too. Both answers."""
    agent_id, other = [(await create_agent(client))["id"] for _ in range(2)]
    first = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": "first"})
    archive_id, passage_id = first.json()[0]["archive_id"], first.json()[0]["id"]
    async with db.transaction():
        await db.execute("SELECT 1 FROM agent WHERE id = $1 FOR NO KEY UPDATE", agent_id)
        delete = asyncio.create_task(client.delete(f"/v1/archives/{archive_id}"))
        await until_waiting(db, delete)
        url = path.format(archive=archive_id, passage=passage_id, other=other)
        write = asyncio.create_task(client.request(method, url))
        await until_waiting(db, write, waiters=2)
    return list(await asyncio.wait_for(asyncio.gather(delete, write), 30))


async def test_a_passage_deleted_while_its_archive_is_deleted_is_not_found(client, db):
    deleted, answer = await write_while_a_reader_holds_the_delete(
        client, db, "DELETE", "/v1/archives/{archive}/passages/{passage}"
    )

    assert deleted.status_code == 204, deleted.text
    assert answer.status_code == 404, answer.text


async def test_an_archive_attached_while_it_is_deleted_is_not_found(client, db):
    deleted, answer = await write_while_a_reader_holds_the_delete(
        client, db, "PATCH", "/v1/agents/{other}/archives/attach/{archive}"
    )

    assert deleted.status_code == 204, deleted.text
    assert answer.status_code == 404, answer.text

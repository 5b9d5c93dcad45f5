"""The lock order of identities/service.py under concurrent requests: identities first, then the
agent (or block) rows. A second connection holds an identity's row to force the interleaving, and a
third shows what the waiting request holds meanwhile."""

import asyncio

import asyncpg
import pytest

from tests.support.api import create_agent
from tests.support.pg import asyncpg_dsn, until_waiting


async def _identity(client, key: str) -> dict:
    response = await client.post("/v1/identities/", json={"identifier_key": key, "name": key, "identity_type": "user"})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("member", ["agent", "block"])
async def test_an_update_naming_identities_waits_for_them_before_it_locks_its_own_row(client, db, database_url, member):
    identity = await _identity(client, "user-1")
    if member == "agent":
        row = await create_agent(client)
        request = client.patch(f"/v1/agents/{row['id']}", json={"identity_ids": [identity["id"]]})
    else:
        row = (await client.post("/v1/blocks/", json={"label": "team", "value": "plans"})).json()
        request = client.patch(f"/v1/blocks/{row['id']}/identities/attach/{identity['id']}")
    holder = await asyncpg.connect(**asyncpg_dsn(database_url))
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM identity WHERE id = $1 FOR UPDATE", identity["id"])
            task = asyncio.create_task(request)
            await until_waiting(db, task)
            async with db.transaction():  # the member's row is not locked while the identity is awaited
                free = await db.fetchval(f"SELECT 1 FROM {member} WHERE id = $1 FOR UPDATE NOWAIT", row["id"])
        response = await task
    finally:
        await holder.close()

    assert free == 1 and not task.exception()
    assert response.status_code == 200, response.text
    linked = await db.fetchval(f"SELECT count(*) FROM identity_{member} WHERE {member}_id = $1", row["id"])
    assert linked == 1


async def test_identity_and_agent_updates_racing_each_other_never_deadlock(client):
    identities = [await _identity(client, f"user-{n}") for n in range(2)]
    agents = [await create_agent(client) for _ in range(2)]
    ids = [identity["id"] for identity in identities]
    requests = []
    for _ in range(5):
        requests += [client.patch(f"/v1/agents/{agent['id']}", json={"identity_ids": ids[::-1]}) for agent in agents]
        requests += [client.patch(f"/v1/identities/{i}", json={"agent_ids": [a["id"] for a in agents]}) for i in ids]
        requests.append(client.put("/v1/identities/", json={"identifier_key": "user-0", "name": "u", "identity_type": "user"}))

    responses = await asyncio.gather(*requests)

    refused = [response.text for response in responses if response.status_code != 200]
    assert refused == []

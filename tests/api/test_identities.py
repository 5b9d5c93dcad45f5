"""Identities over HTTP: CRUD and upsert by identifier_key, the agents and blocks that belong to them,
the list filters, and bad input (a clear 4xx that changes nothing). The SDK's identity methods end to
end are in tests/sdk/test_identities.py."""

import asyncio

import pytest
from pydantic import SecretStr
from sqlalchemy import text

from memvm.db.uow import transaction
from memvm.identities import service
from memvm.identities.schemas import IdentityCreate
from tests.support.api import app_client, create_agent, organization_keys

ADMIN = "admin-secret-for-identity-tests"
UNKNOWN_IDENTITY = "identity-00000000-0000-4000-8000-000000000000"
UNKNOWN_AGENT = "agent-00000000-0000-4000-8000-000000000000"


def identity_body(key: str = "user-1", **fields) -> dict:
    return {"identifier_key": key, "name": "Bob", "identity_type": "user", **fields}


async def new_identity(client, key: str = "user-1", headers: dict | None = None, **fields) -> dict:
    response = await client.post("/v1/identities/", json=identity_body(key, **fields), headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def new_block(client, label: str = "team", headers: dict | None = None) -> dict:
    response = await client.post("/v1/blocks/", json={"label": label, "value": "plans"}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def rows(db) -> dict:
    identities = await db.fetch("SELECT id, identifier_key, name, identity_type, properties::text FROM identity ORDER BY id")
    agents = await db.fetch("SELECT identity_id, agent_id FROM identity_agent ORDER BY 1, 2")
    blocks = await db.fetch("SELECT identity_id, block_id FROM identity_block ORDER BY 1, 2")
    return {
        "identities": [tuple(r) for r in identities],
        "agents": [tuple(r) for r in agents],
        "blocks": [tuple(r) for r in blocks],
    }


async def test_create_retrieve_update_and_delete(client):
    agent = await create_agent(client)
    color = {"key": "color", "value": "green", "type": "string"}
    created = await new_identity(client, properties=[color, {"key": "age", "value": 41, "type": "number"}])

    fetched = (await client.get(f"/v1/identities/{created['id']}")).json()
    age = {"key": "age", "value": 42, "type": "number"}
    change = {"name": "Robert", "properties": [age], "agent_ids": [agent["id"]]}
    updated = (await client.patch(f"/v1/identities/{created['id']}", json=change)).json()
    deleted = await client.delete(f"/v1/identities/{created['id']}")
    after = await client.get(f"/v1/identities/{created['id']}")

    assert created["id"].startswith("identity-") and created["agent_ids"] == [] and created["block_ids"] == []
    assert fetched == created
    # PATCH merges properties by key and adds agents (Letta's update).
    assert (updated["name"], updated["properties"], updated["agent_ids"]) == ("Robert", [color, age], [agent["id"]])
    assert (deleted.status_code, deleted.json(), after.status_code) == (200, None, 404)
    assert (await client.get(f"/v1/agents/{agent['id']}")).json()["identities"] == []


async def test_upsert_creates_then_replaces_by_identifier_key(client):
    first, second = await create_agent(client), await create_agent(client)
    created = (
        await client.put(
            "/v1/identities/",
            json=identity_body(properties=[{"key": "a", "value": 1, "type": "number"}], agent_ids=[first["id"]]),
        )
    ).json()
    replaced = await client.put(
        "/v1/identities/",
        json=identity_body(
            name="Bobby",
            identity_type="org",
            properties=[{"key": "b", "value": True, "type": "boolean"}],
            agent_ids=[second["id"]],
        ),
    )

    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["id"] == created["id"]
    assert (replaced.json()["name"], replaced.json()["identity_type"]) == ("Bobby", "org")
    assert replaced.json()["properties"] == [{"key": "b", "value": True, "type": "boolean"}]
    assert replaced.json()["agent_ids"] == [second["id"]]
    assert len((await client.get("/v1/identities/")).json()) == 1


async def test_an_upsert_that_loses_the_race_to_create_the_key_updates_the_winner_s_identity(client, db, sessionmaker):
    """Two upserts of a new key: the one whose insert waits on the other's finds the key taken when
    that commits, and updates the identity it made instead of answering 409."""
    await new_identity(client, "warm-up")  # the organization exists
    organization = await db.fetchval("SELECT organization_id FROM identity")
    async with transaction(sessionmaker, organization) as first:
        await first.execute(text("SET LOCAL lock_timeout = '10s'"))
        winner = await service.upsert_identity(first, IdentityCreate.model_validate(identity_body("racer")))
        second = asyncio.create_task(client.put("/v1/identities/", json=identity_body("racer", name="Second")))
        for _ in range(500):  # until the second upsert waits for the first's insert
            if await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the second upsert never waited for the first")
    response = await asyncio.wait_for(second, 10)

    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["name"]) == (winner.id, "Second")


async def test_properties_put_replaces_them(client):
    identity = await new_identity(client, properties=[{"key": "a", "value": "x", "type": "string"}])
    settings = {"key": "settings", "value": {"theme": "dark"}, "type": "json"}

    response = await client.put(f"/v1/identities/{identity['id']}/properties", json=[settings])

    assert response.status_code == 200, response.text
    assert (await client.get(f"/v1/identities/{identity['id']}")).json()["properties"] == [settings]


async def test_a_taken_identifier_key_is_409_naming_it_and_changes_nothing(client, db):
    await new_identity(client, "user-1")
    other = await new_identity(client, "user-2")
    before = await rows(db)

    created = await client.post("/v1/identities/", json=identity_body("user-1"))
    renamed = await client.patch(f"/v1/identities/{other['id']}", json={"identifier_key": "user-1", "name": "lost"})

    assert (created.status_code, renamed.status_code) == (409, 409)
    assert "'user-1'" in created.json()["detail"] and "'user-1'" in renamed.json()["detail"]
    assert await rows(db) == before


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"identifier_key": "k", "name": "n"}, "identity_type"),
        (identity_body(identity_type="robot"), "identity_type"),
        (identity_body(""), "identifier_key"),
        (identity_body(agent_ids=["agent-1"]), "agent-1"),
        (identity_body(block_ids=[UNKNOWN_AGENT]), UNKNOWN_AGENT),
        (identity_body(properties=[{"key": "age", "value": "old", "type": "number"}]), "'age'"),
        (identity_body(properties=[{"key": "ok", "value": True, "type": "number"}]), "'ok'"),
        (identity_body(properties=[{"key": "x", "value": "1", "type": "list"}]), "type"),
        (identity_body(properties=[{"key": "a", "value": "1", "type": "string"}] * 2), "'a'"),
    ],
)
async def test_bad_input_is_422_naming_it_and_stores_nothing(client, db, body, named):
    before = await rows(db)

    created = await client.post("/v1/identities/", json=body)
    upserted = await client.put("/v1/identities/", json=body)

    assert (created.status_code, upserted.status_code) == (422, 422), created.text
    assert named in created.text
    assert await rows(db) == before


async def test_unknown_agents_blocks_and_identities_are_404_and_change_nothing(client, db):
    agent = await create_agent(client)
    identity = await new_identity(client)
    before = await rows(db)
    agents_before = await db.fetchval("SELECT count(*) FROM agent")

    answers = [
        await client.post("/v1/identities/", json=identity_body("new", agent_ids=[agent["id"], UNKNOWN_AGENT])),
        await client.patch(f"/v1/identities/{identity['id']}", json={"name": "lost", "agent_ids": [UNKNOWN_AGENT]}),
        await client.post("/v1/agents/", json={"identity_ids": [identity["id"], UNKNOWN_IDENTITY]}),
        await client.patch(f"/v1/agents/{agent['id']}", json={"description": "lost", "identity_ids": [UNKNOWN_IDENTITY]}),
        await client.patch(f"/v1/agents/{agent['id']}/identities/attach/{UNKNOWN_IDENTITY}"),
        await client.patch(f"/v1/agents/{UNKNOWN_AGENT}/identities/attach/{identity['id']}"),
        await client.get(f"/v1/identities/{UNKNOWN_IDENTITY}/agents"),
    ]

    assert [answer.status_code for answer in answers] == [404] * len(answers)
    assert UNKNOWN_AGENT in answers[0].json()["detail"] and UNKNOWN_IDENTITY in answers[2].json()["detail"]
    assert await rows(db) == before and await db.fetchval("SELECT count(*) FROM agent") == agents_before
    assert (await client.get(f"/v1/agents/{agent['id']}")).json()["description"] is None


async def test_attach_and_detach_an_agent(client):
    agent = await create_agent(client)
    identity = await new_identity(client)
    path = f"/v1/agents/{agent['id']}/identities"

    attached = [await client.patch(f"{path}/attach/{identity['id']}") for _ in range(2)]  # again: no change
    with_it = (await client.get(f"/v1/agents/{agent['id']}")).json()
    detached = [await client.patch(f"{path}/detach/{identity['id']}") for _ in range(2)]
    without = (await client.get(f"/v1/agents/{agent['id']}")).json()

    assert [r.status_code for r in attached + detached] == [200] * 4 and attached[0].json() is None
    assert with_it["identity_ids"] == [identity["id"]]
    assert [(i["identifier_key"], i["agent_ids"]) for i in with_it["identities"]] == [("user-1", [agent["id"]])]
    assert (without["identities"], without["identity_ids"]) == ([], [])
    assert (await client.get(f"/v1/identities/{identity['id']}")).json()["agent_ids"] == []


async def test_identity_ids_on_agent_create_and_update_set_its_identities(client):
    one, two = await new_identity(client, "one"), await new_identity(client, "two")
    agent = await create_agent(client, identity_ids=[one["id"]])

    updated = (await client.patch(f"/v1/agents/{agent['id']}", json={"identity_ids": [two["id"]]})).json()

    assert agent["identity_ids"] == [one["id"]]
    assert updated["identity_ids"] == [two["id"]]
    assert (await client.get(f"/v1/identities/{one['id']}")).json()["agent_ids"] == []


async def test_a_deleted_agent_or_block_leaves_its_identities(client):
    agent, block = await create_agent(client), await new_block(client)
    identity = await new_identity(client, agent_ids=[agent["id"]], block_ids=[block["id"]])

    await client.delete(f"/v1/agents/{agent['id']}")
    await client.delete(f"/v1/blocks/{block['id']}")

    after = (await client.get(f"/v1/identities/{identity['id']}")).json()
    assert (after["agent_ids"], after["block_ids"]) == ([], [])


async def test_agents_list_filters_by_identity_and_identifier_keys(client):
    bob, ann, nobody = await create_agent(client), await create_agent(client), await create_agent(client)
    bobs = await new_identity(client, "bob", agent_ids=[bob["id"]])
    await new_identity(client, "ann", agent_ids=[ann["id"], bob["id"]])

    def ids(response) -> set[str]:
        assert response.status_code == 200, response.text
        return {agent["id"] for agent in response.json()}

    by_id = ids(await client.get("/v1/agents/", params={"identity_id": bobs["id"]}))
    by_one_key = ids(await client.get("/v1/agents/", params={"identifier_keys": ["ann"]}))
    by_keys = ids(await client.get("/v1/agents/", params={"identifier_keys": ["ann", "bob"]}))
    of_identity = ids(await client.get(f"/v1/identities/{bobs['id']}/agents"))
    bad = await client.get("/v1/agents/", params={"identity_id": "bob"})

    assert by_id == of_identity == {bob["id"]}
    assert by_one_key == by_keys == {bob["id"], ann["id"]} and nobody["id"] not in by_keys
    assert bad.status_code == 422


async def test_identities_list_filters_and_pages(client):
    for key, name, kind in (("u1", "Bob Smith", "user"), ("u2", "Ann", "user"), ("acme", "Acme Inc", "org")):
        await new_identity(client, key, name=name, identity_type=kind)

    async def keys(**params) -> list[str]:
        response = await client.get("/v1/identities/", params=params)
        assert response.status_code == 200, response.text
        return [identity["identifier_key"] for identity in response.json()]

    first_page = await keys(limit=2, order="asc")
    assert first_page == ["u1", "u2"]
    assert await keys() == ["acme", "u2", "u1"]  # newest first, as Letta
    identities = (await client.get("/v1/identities/", params={"limit": 2, "order": "asc"})).json()
    assert await keys(after=identities[-1]["id"], order="asc") == ["acme"]
    assert await keys(name="smith") == ["u1"]
    assert await keys(identifier_key="u2") == ["u2"]
    assert await keys(identity_type="org") == ["acme"]
    assert (await client.get("/v1/identities/count")).json() == 3
    assert (await client.get("/v1/identities/", params={"identity_type": "robot"})).status_code == 422


async def test_block_identities(client):
    team, notes = await new_block(client, "team"), await new_block(client, "notes")
    await new_block(client, "stranger")  # belongs to no identity: the filters leave it out
    identity = await new_identity(client, block_ids=[team["id"]])
    path = f"/v1/blocks/{notes['id']}/identities"

    attached = await client.patch(f"{path}/attach/{identity['id']}")
    both = (await client.get(f"/v1/identities/{identity['id']}/blocks")).json()
    listed = (await client.get("/v1/blocks/", params={"identity_id": identity["id"]})).json()
    detached = await client.patch(f"{path}/detach/{identity['id']}")
    left = (await client.get(f"/v1/identities/{identity['id']}")).json()

    assert (attached.status_code, attached.json()["id"]) == (200, notes["id"])
    assert {block["id"] for block in both} == {block["id"] for block in listed} == {team["id"], notes["id"]}
    assert (detached.status_code, left["block_ids"]) == (200, [team["id"]])


async def test_another_organization_s_identities_agents_and_blocks_are_404(settings, db):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN)})) as client:
        key_a, key_b = await organization_keys(client, ADMIN, "a", "b")
        their_agent = (await client.post("/v1/agents/", json={}, headers=key_a)).json()
        their_block = await new_block(client, headers=key_a)
        theirs = await new_identity(client, "shared-key", headers=key_a, agent_ids=[their_agent["id"]])
        my_agent = (await client.post("/v1/agents/", json={}, headers=key_b)).json()
        before = await rows(db)

        refused = [
            await client.get(f"/v1/identities/{theirs['id']}", headers=key_b),
            await client.post("/v1/identities/", json=identity_body("b", agent_ids=[their_agent["id"]]), headers=key_b),
            await client.post("/v1/identities/", json=identity_body("b", block_ids=[their_block["id"]]), headers=key_b),
            await client.patch(f"/v1/agents/{my_agent['id']}/identities/attach/{theirs['id']}", headers=key_b),
            await client.patch(f"/v1/agents/{my_agent['id']}", json={"identity_ids": [theirs["id"]]}, headers=key_b),
        ]
        filtered = await client.get("/v1/agents/", params={"identity_id": theirs["id"]}, headers=key_b)
        by_key = await client.get("/v1/agents/", params={"identifier_keys": ["shared-key"]}, headers=key_b)
        unchanged = await rows(db)
        # The key is unique per organization: B's upsert of it makes B's own identity.
        mine = await client.put("/v1/identities/", json=identity_body("shared-key", name="B's"), headers=key_b)
        still_theirs = (await client.get(f"/v1/identities/{theirs['id']}", headers=key_a)).json()

    assert [answer.status_code for answer in refused] == [404] * len(refused)
    assert (filtered.json(), by_key.json()) == ([], [])
    assert unchanged == before
    assert mine.status_code == 200 and mine.json()["id"] != theirs["id"]
    assert (still_theirs["name"], still_theirs["agent_ids"]) == ("Bob", [their_agent["id"]])

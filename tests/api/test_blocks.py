import asyncio

from tests.support.api import compiled_prompt, create_agent, create_block, table_counts

UNKNOWN_BLOCK = "block-00000000-0000-4000-8000-000000000000"


async def test_create_and_retrieve_block_with_etag(client):
    block = await create_block(client, label="notes", value="Zoë 🐙", limit=20, read_only=True, tags=["x"], metadata={"m": 1})

    response = await client.get(f"/v1/blocks/{block['id']}")

    assert response.status_code == 200
    assert response.headers["ETag"] == '"1"'
    body = response.json()
    assert (body["label"], body["value"], body["limit"], body["read_only"], body["tags"], body["metadata"]) == (
        "notes",
        "Zoë 🐙",
        20,
        True,
        ["x"],
        {"m": 1},
    )


async def test_create_block_null_value_is_empty_and_nul_is_refused(client):
    empty = await create_block(client, value=None)
    with_nul = await client.post("/v1/blocks/", json={"label": "raw", "value": "a\x00b"})

    assert empty["value"] == ""
    assert with_nul.status_code == 422
    assert "body.value: the text contains a NUL character" in with_nul.json()["detail"]
    assert [block["label"] for block in (await client.get("/v1/blocks/")).json()] == ["notes"]


async def test_list_blocks_ascending_by_default_with_filters(client):
    first = await create_block(client, label="a", value="alpha text", tags=["t1"])
    second = await create_block(client, label="b", value="beta", tags=["t1", "t2"])

    everything = (await client.get("/v1/blocks/")).json()
    by_label = (await client.get("/v1/blocks/", params={"label": "b"})).json()
    by_tag = (await client.get("/v1/blocks/", params=[("tags", "t2")])).json()
    by_text = (await client.get("/v1/blocks/", params={"value_search": "ALPHA"})).json()
    page_two = (await client.get("/v1/blocks/", params={"limit": 1, "after": first["id"]})).json()

    assert [b["id"] for b in everything] == [first["id"], second["id"]]
    assert [b["id"] for b in by_label] == [second["id"]]
    assert [b["id"] for b in by_tag] == [second["id"]]
    assert [b["id"] for b in by_text] == [first["id"]]
    assert [b["id"] for b in page_two] == [second["id"]]


async def test_patch_block_bumps_version_and_recompiles_every_attached_agent(client, db):
    shared = await create_block(client, label="team", value="old plan")
    one = await create_agent(client, block_ids=[shared["id"]])
    two = await create_agent(client, block_ids=[shared["id"]])

    response = await client.patch(f"/v1/blocks/{shared['id']}", json={"value": "new plan"})

    assert response.status_code == 200
    assert response.json()["version"] == 2 and response.headers["ETag"] == '"2"'
    for agent in (one, two):
        prompt = await compiled_prompt(client, agent["id"])
        stored = await db.fetchval("SELECT compiled_system FROM agent WHERE id = $1", agent["id"])
        assert "new plan" in prompt and "old plan" not in prompt and "chars_current=8" in prompt and stored == prompt
    changes = await db.fetch(
        "SELECT change, version, value, actor_type FROM block_change WHERE block_id = $1 ORDER BY id", shared["id"]
    )
    assert [tuple(c) for c in changes] == [("create", 1, "old plan", "local"), ("update", 2, "new plan", "local")]


async def test_patch_without_real_change_keeps_version(client):
    block = await create_block(client, value="same")

    response = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "same", "description": None})

    assert response.json()["version"] == 1


async def test_stale_if_match_is_412_and_changes_nothing(client, db):
    block = await create_block(client, value="v1")
    await client.patch(f"/v1/blocks/{block['id']}", json={"value": "v2"})
    before = await table_counts(db)

    stale = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "v3"}, headers={"If-Match": '"1"'})
    fresh = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "v3"}, headers={"If-Match": 'W/"2"'})

    assert stale.status_code == 412
    assert "at version 2" in stale.json()["detail"] and "expected version 1" in stale.json()["detail"]
    assert before["block_change"] + 1 == (await table_counts(db))["block_change"]
    assert fresh.status_code == 200 and fresh.json()["value"] == "v3"


async def test_garbage_if_match_is_400(client):
    block = await create_block(client)

    response = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "x"}, headers={"If-Match": "yesterday"})

    assert response.status_code == 400
    assert "If-Match must be a block version" in response.json()["detail"]


async def test_over_limit_value_and_limit_below_length_are_refused_unchanged(client, db):
    block = await create_block(client, value="12345", limit=10)
    before = await table_counts(db)

    too_long = await client.patch(f"/v1/blocks/{block['id']}", json={"value": "x" * 11})
    too_small = await client.patch(f"/v1/blocks/{block['id']}", json={"limit": 4})
    both = await client.patch(f"/v1/blocks/{block['id']}", json={"limit": 4, "value": "abcd"})

    assert too_long.status_code == 422 and "11 characters, over its limit of 10" in too_long.json()["detail"]
    assert (
        too_small.status_code == 422 and "Limit 4" in too_small.json()["detail"] and "5 characters" in too_small.json()["detail"]
    )
    assert both.status_code == 200 and both.json()["limit"] == 4
    assert (await table_counts(db))["block_change"] == before["block_change"] + 1


async def test_limit_is_counted_in_characters_not_bytes(client):
    block = await create_block(client, value="🐙" * 5, limit=5)

    assert block["value"] == "🐙" * 5


async def test_relabel_that_clashes_on_an_attached_agent_is_409(client):
    agent = await create_agent(client)
    persona = agent["blocks"][1]

    response = await client.patch(f"/v1/blocks/{persona['id']}", json={"label": "human"})

    assert response.status_code == 409
    assert "'human'" in response.json()["detail"] and agent["id"] in response.json()["detail"]
    assert response.headers["x-should-retry"] == "false"


async def test_relabel_updates_the_agent_label_index(client):
    agent = await create_agent(client)
    persona = agent["blocks"][1]

    await client.patch(f"/v1/blocks/{persona['id']}", json={"label": "self"})

    assert (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/self")).status_code == 200
    assert (await client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/persona")).status_code == 404
    assert "<self>" in await compiled_prompt(client, agent["id"])


async def test_delete_block_detaches_it_and_recompiles(client):
    notes = await create_block(client, value="temporary")
    agent = await create_agent(client, block_ids=[notes["id"]])

    deleted = await client.delete(f"/v1/blocks/{notes['id']}")

    assert deleted.status_code == 200
    assert (await client.get(f"/v1/blocks/{notes['id']}")).status_code == 404
    assert "temporary" not in await compiled_prompt(client, agent["id"])
    assert (await client.delete(f"/v1/blocks/{notes['id']}")).status_code == 404


async def test_block_agents_lists_every_holder(client):
    shared = await create_block(client)
    one = await create_agent(client, block_ids=[shared["id"]])
    two = await create_agent(client, block_ids=[shared["id"]])
    await create_agent(client)

    holders = (await client.get(f"/v1/blocks/{shared['id']}/agents")).json()

    assert sorted(a["id"] for a in holders) == sorted([one["id"], two["id"]])
    assert (await client.get(f"/v1/blocks/{UNKNOWN_BLOCK}/agents")).status_code == 404


async def test_concurrent_if_match_writers_never_lose_an_update(client):
    block = await create_block(client, value="")

    async def append(marker: str) -> int:
        for attempt in range(50):
            current = await client.get(f"/v1/blocks/{block['id']}")
            value = current.json()["value"] + marker
            response = await client.patch(
                f"/v1/blocks/{block['id']}", json={"value": value}, headers={"If-Match": current.headers["ETag"]}
            )
            if response.status_code == 200:
                return attempt
            assert response.status_code == 412, response.text
        raise AssertionError("writer starved")

    attempts = await asyncio.gather(*(append(f"<{i}>") for i in range(8)))

    final = (await client.get(f"/v1/blocks/{block['id']}")).json()
    assert sorted(final["value"].replace(">", "> ").split()) == sorted(f"<{i}>" for i in range(8))
    assert final["version"] == 9
    assert sum(attempts) > 0  # some writers did collide and were told to retry


async def test_concurrent_patches_of_different_fields_both_survive(client):
    block = await create_block(client, value="v")

    await asyncio.gather(
        *(client.patch(f"/v1/blocks/{block['id']}", json={"value": f"value {i}"}) for i in range(5)),
        *(client.patch(f"/v1/blocks/{block['id']}", json={"description": f"desc {i}"}) for i in range(5)),
    )

    final = (await client.get(f"/v1/blocks/{block['id']}")).json()
    assert final["version"] == 11
    assert final["value"].startswith("value ") and final["description"].startswith("desc ")

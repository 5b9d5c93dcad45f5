"""Archival memory over REST, with the real offline embedding model."""

from tests.support.api import compiled_prompt, create_agent

FACTS = [
    ("Bob's daughter is learning to play the violin.", ["family"]),
    ("The office moved to a new building near the harbour in March.", ["work"]),
    ("Bob is allergic to peanuts and carries an epinephrine pen.", ["health"]),
    ("The quarterly budget review happens on the first Monday of each quarter.", ["work"]),
    ("Bob's favourite holiday destination is the Norwegian fjords.", ["travel", "family"]),
]


async def insert(client, agent_id, text, tags=(), **extra):
    response = await client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text, "tags": list(tags), **extra})
    assert response.status_code == 200, response.text
    [passage] = response.json()
    return passage


async def search(client, agent_id, query, **params):
    response = await client.get(f"/v1/agents/{agent_id}/archival-memory/search", params={"query": query, **params})
    assert response.status_code == 200, response.text
    return response.json()


async def test_paraphrased_queries_find_the_right_passage(client):
    agent = await create_agent(client)
    for text, tags in FACTS:
        await insert(client, agent["id"], text, tags)

    queries = {
        "what instrument is his kid studying?": FACTS[0][0],
        "where is the workplace located now?": FACTS[1][0],
        "which food could make him sick?": FACTS[2][0],
        "where does he like to go on vacation?": FACTS[4][0],
    }
    for query, expected in queries.items():
        body = await search(client, agent["id"], query, top_k=3)
        assert body["results"][0]["content"] == expected, query
        assert body["count"] == 3 and body["results"][0]["relevance"] > body["results"][1]["relevance"]


async def test_insert_shapes_and_listing(client):
    agent = await create_agent(client)

    passage = await insert(client, agent["id"], "First note", ["a"])
    await insert(client, agent["id"], "Second note about cats")
    listed = (await client.get(f"/v1/agents/{agent['id']}/archival-memory")).json()
    searched = (await client.get(f"/v1/agents/{agent['id']}/archival-memory", params={"search": "CATS"})).json()
    after = (await client.get(f"/v1/agents/{agent['id']}/archival-memory", params={"after": passage["id"]})).json()

    assert passage["id"].startswith("passage-") and passage["archive_id"].startswith("archive-")
    assert passage["embedding_config"]["embedding_dim"] == 384 and passage["embedding"] is None
    assert [p["text"] for p in listed] == ["First note", "Second note about cats"]
    assert [p["text"] for p in searched] == ["Second note about cats"]
    assert [p["text"] for p in after] == ["Second note about cats"]


async def test_memory_metadata_counts_and_tags_follow_inserts_and_deletes(client):
    agent = await create_agent(client)
    assert "archival memory" not in await compiled_prompt(client, agent["id"])

    first = await insert(client, agent["id"], "note one", ["zeta", "alpha"])
    await insert(client, agent["id"], "note two", ["alpha"])
    with_two = await compiled_prompt(client, agent["id"])
    await client.delete(f"/v1/agents/{agent['id']}/archival-memory/{first['id']}")
    with_one = await compiled_prompt(client, agent["id"])

    assert "2 total memories you created are stored in archival memory" in with_two
    assert "Available archival memory tags: alpha, zeta" in with_two
    assert "note one" not in with_two  # counts and tags only, never content
    assert "1 total memories you created are stored in archival memory" in with_one
    assert "Available archival memory tags: alpha\n" in with_one


async def test_tag_filters_apply_before_the_limit(client):
    agent = await create_agent(client)
    for n in range(20):
        await insert(client, agent["id"], f"Common note number {n} about the weather", ["common"])
    for n in range(4):
        await insert(client, agent["id"], f"Rare entry {n} about a lighthouse", ["rare", "coast" if n % 2 else "sea"])

    any_rare = await search(client, agent["id"], "weather report", tags=["rare"], top_k=4)
    all_tags = await search(client, agent["id"], "weather report", tags=["rare", "coast"], tag_match_mode="all", top_k=5)
    either = await search(client, agent["id"], "weather report", params=None, **{"tags": ["coast", "sea"], "top_k": 4})

    assert any_rare["count"] == 4 and all("rare" in r["tags"] for r in any_rare["results"])
    assert all_tags["count"] == 2 and all({"rare", "coast"} <= set(r["tags"]) for r in all_tags["results"])
    assert either["count"] == 4


async def test_date_filters(client):
    agent = await create_agent(client)
    await insert(client, agent["id"], "an old memory about gardens", created_at="2020-05-01T10:00:00Z")
    await insert(client, agent["id"], "a new memory about gardens")

    old = await search(client, agent["id"], "gardens", end_datetime="2020-12-31")
    new = await search(client, agent["id"], "gardens", start_datetime="2021-01-01T00:00")
    bad = await client.get(
        f"/v1/agents/{agent['id']}/archival-memory/search", params={"query": "x", "start_datetime": "yesterday"}
    )

    assert [r["content"] for r in old["results"]] == ["an old memory about gardens"]
    assert [r["content"] for r in new["results"]] == ["a new memory about gardens"]
    assert bad.status_code == 400 and "ISO 8601" in bad.json()["detail"]


async def test_delete_is_scoped_to_the_agent(client):
    owner = await create_agent(client)
    stranger = await create_agent(client)
    passage = await insert(client, owner["id"], "private note")

    refused = await client.delete(f"/v1/agents/{stranger['id']}/archival-memory/{passage['id']}")
    allowed = await client.delete(f"/v1/agents/{owner['id']}/archival-memory/{passage['id']}")

    assert refused.status_code == 404 and allowed.status_code == 200
    assert (await client.get(f"/v1/agents/{owner['id']}/archival-memory")).json() == []


async def test_too_long_passage_is_refused(client):
    agent = await create_agent(client)

    response = await client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": "x" * 10_001})

    assert response.status_code == 422 and "body.text" in response.json()["detail"]


async def test_shared_archive_between_two_agents(client):
    one = await create_agent(client)
    two = await create_agent(client)
    archive = (await client.post("/v1/archives/", json={"name": "team notes"})).json()

    for agent in (one, two):
        assert (await client.patch(f"/v1/agents/{agent['id']}/archives/attach/{archive['id']}")).status_code == 200
    batch = await client.post(
        f"/v1/archives/{archive['id']}/passages/batch",
        json={"passages": [{"text": "The team standup is at nine."}, {"text": "Deploys happen on Thursdays."}]},
    )
    found = await search(client, two["id"], "when do we ship releases?", top_k=1)
    listed = (await client.get("/v1/archives/", params={"agent_id": one["id"]})).json()
    readers = (await client.get(f"/v1/archives/{archive['id']}/agents")).json()

    assert batch.status_code == 200 and len(batch.json()) == 2
    assert found["results"][0]["content"] == "Deploys happen on Thursdays."
    assert [a["id"] for a in listed] == [archive["id"]]
    assert sorted(r["id"] for r in readers) == sorted([one["id"], two["id"]])
    for agent in (one, two):
        assert "2 total memories you created are stored in archival memory" in await compiled_prompt(client, agent["id"])
    assert (await client.patch(f"/v1/agents/{one['id']}/archives/detach/{archive['id']}")).status_code == 200
    assert "archival memory" not in await compiled_prompt(client, one["id"])


async def test_archive_crud_and_model_mismatch(client):
    created = await client.post(
        "/v1/archives/", json={"name": "big", "description": "d", "embedding": "openai/text-embedding-3-small"}
    )
    archive = created.json()
    agent = await create_agent(client)

    mismatch = await client.patch(f"/v1/agents/{agent['id']}/archives/attach/{archive['id']}")
    renamed = await client.patch(f"/v1/archives/{archive['id']}", json={"name": "bigger"})
    deleted = await client.delete(f"/v1/archives/{archive['id']}")
    gone = await client.get(f"/v1/archives/{archive['id']}")

    assert created.status_code == 200 and archive["embedding_config"]["embedding_dim"] == 1536
    assert mismatch.status_code == 409 and "local/all-MiniLM-L6-v2" in mismatch.json()["detail"]
    assert renamed.json()["name"] == "bigger"
    assert deleted.status_code == 204 and gone.status_code == 404


async def test_a_batch_answers_each_passage_as_stored_in_the_order_sent(client):
    agent = await create_agent(client)
    archive = (await client.post("/v1/archives/", json={"name": "dated notes"})).json()
    assert (await client.patch(f"/v1/agents/{agent['id']}/archives/attach/{archive['id']}")).status_code == 200
    sent = [
        {"text": "Written in 2020.", "created_at": "2020-05-01T12:00:00Z"},
        {"text": "Written today.", "tags": ["b", "a", "b"], "metadata": {"n": 2}},
        {"text": "Written in 2019.", "created_at": "2019-05-01T12:00:00Z", "metadata": {"n": 3}},
    ]

    batch = await client.post(f"/v1/archives/{archive['id']}/passages/batch", json={"passages": sent})
    listed = (await client.get(f"/v1/agents/{agent['id']}/archival-memory")).json()

    assert batch.status_code == 200, batch.text
    answered = batch.json()
    assert [(p["text"], p["tags"], p["metadata"]) for p in answered] == [
        ("Written in 2020.", [], {}),
        ("Written today.", ["a", "b"], {"n": 2}),
        ("Written in 2019.", [], {"n": 3}),
    ]
    assert answered[0]["created_at"].startswith("2020-05-01T12:00:00")
    assert answered[1]["created_at"] > "2026"
    assert answered[2]["created_at"].startswith("2019-05-01T12:00:00")
    # the answer is what was stored: the listing (oldest first) shows the same passages and times
    stored = {p["id"]: (p["text"], p["created_at"]) for p in listed}
    assert stored == {p["id"]: (p["text"], p["created_at"]) for p in answered}
    assert [p["text"] for p in listed] == ["Written in 2019.", "Written in 2020.", "Written today."]

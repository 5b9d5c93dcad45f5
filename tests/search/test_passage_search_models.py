"""POST /v1/passages/search over archives of several embedding models: the offline model and
openai/text-embedding-3-small (served by the scripted fake's /v1/embeddings)."""

import logging

from pydantic import SecretStr

from tests.support.api import app_client

REMOTE = "openai/text-embedding-3-small"
UNSEARCHED = "x-memvm-unsearched-archives"
ADMIN_KEY = "admin-secret-for-tests"


async def archive_with(client, name, text, embedding=None, headers=None):
    body = {"name": name} | ({"embedding": embedding} if embedding else {})
    archive = (await client.post("/v1/archives/", json=body, headers=headers)).json()
    added = await client.post(f"/v1/archives/{archive['id']}/passages", json={"text": text}, headers=headers)
    assert added.status_code == 200, added.text
    return archive


async def search(client, headers=None, **body):
    response = await client.post("/v1/passages/search", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


async def test_org_wide_search_finds_passages_of_every_embedding_model(client, llm):
    local = await archive_with(client, "local", "Unique passage about quantum computing")
    remote = await archive_with(client, "remote", "Unique passage about blockchain technology", REMOTE)
    await archive_with(client, "unrelated", "The office plants need water on Fridays")

    response = await search(client, query="unique passage", limit=20)
    hits = response.json()
    by_archive = {hit["passage"]["archive_id"]: hit for hit in hits}

    assert UNSEARCHED not in response.headers
    assert {local["id"], remote["id"]} <= set(by_archive)
    assert by_archive[remote["id"]]["metadata"]["embedding_model"] == REMOTE
    assert by_archive[remote["id"]]["metadata"]["model_rank"] == 1 and by_archive[local["id"]]["metadata"]["model_rank"] == 1
    assert [hit["metadata"]["rrf_score"] for hit in hits] == sorted((hit["metadata"]["rrf_score"] for hit in hits), reverse=True)
    assert len(hits) == 3 and hits[-1]["passage"]["text"].startswith("The office plants")  # second of the local model
    assert [r["input"] for r in llm.embedding_requests][-1] == ["unique passage"]  # one query embedding per model


async def test_an_unavailable_model_leaves_its_archives_out_and_names_them(client, llm, caplog):
    local = await archive_with(client, "local", "Unique passage about quantum computing")
    remote = await archive_with(client, "remote", "Unique passage about blockchain technology", REMOTE)
    llm.embeddings_down.add("text-embedding-3-small")

    with caplog.at_level(logging.WARNING, logger="memvm.runtime.operations.passages"):
        response = await search(client, query="unique passage", limit=20)
    only_remote = await client.post("/v1/passages/search", json={"query": "unique passage", "archive_id": remote["id"]})
    listing = await search(client, limit=20)  # no query: nothing to embed, every archive is listed

    assert [hit["passage"]["archive_id"] for hit in response.json()] == [local["id"]]
    assert response.headers[UNSEARCHED] == remote["id"]
    assert any(remote["id"] in record.getMessage() and REMOTE in record.getMessage() for record in caplog.records)
    assert only_remote.status_code == 502 and "Embedding request failed" in only_remote.json()["detail"]
    assert UNSEARCHED not in listing.headers
    assert [hit["passage"]["archive_id"] for hit in listing.json()] == [remote["id"], local["id"]]  # newest first


async def test_another_organizations_archives_are_never_searched(settings, llm):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN_KEY)})) as client:
        keys = []
        for organization in ("a", "b"):
            created = await client.post(
                "/v1/admin/api-keys", json={"organization": organization}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
            )
            keys.append({"Authorization": f"Bearer {created.json()['key']}"})
        a, b = keys
        theirs = await archive_with(client, "theirs", "Unique passage of organization a", REMOTE, headers=a)
        ours = await archive_with(client, "ours", "Unique passage of organization b", headers=b)
        embedded = len(llm.embedding_requests)
        llm.embeddings_down.add("text-embedding-3-small")

        response = await search(client, headers=b, query="unique passage", limit=20)

    assert [hit["passage"]["archive_id"] for hit in response.json()] == [ours["id"]]
    assert UNSEARCHED not in response.headers  # a's archive of the unavailable model is not b's concern
    assert len(llm.embedding_requests) == embedded  # b's search never embedded with a's model
    assert theirs["id"] not in response.text


async def test_an_archive_of_another_vector_size_than_the_model_now_makes_is_named(settings, llm):
    async with app_client(settings) as client:
        local = await archive_with(client, "local", "Unique passage about quantum computing")
        remote = await archive_with(client, "remote", "Unique passage about blockchain technology", REMOTE)
    async with app_client(settings.model_copy(update={"embedding_dim": 256})) as client:  # MEMVM_EMBEDDING_DIM changed
        response = await search(client, query="unique passage")

    assert [hit["passage"]["archive_id"] for hit in response.json()] == [local["id"]]
    assert response.headers[UNSEARCHED] == remote["id"]

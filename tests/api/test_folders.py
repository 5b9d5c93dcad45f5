"""Folders over HTTP with bad input: each is a clear 4xx that names what to fix and changes nothing.
The folder methods working end to end are in tests/sdk/test_folders.py."""

import pytest

from tests.support.api import create_agent

UNKNOWN_FOLDER = "source-00000000-0000-4000-8000-000000000000"
UNKNOWN_AGENT = "agent-00000000-0000-4000-8000-000000000000"


async def rows(db) -> dict:
    folders = await db.fetch("SELECT id, name, description, embedding_model FROM folder ORDER BY id")
    links = await db.fetch("SELECT agent_id, folder_id FROM agent_folder ORDER BY agent_id, folder_id")
    return {"folders": [tuple(r) for r in folders], "links": [tuple(r) for r in links]}


async def new_folder(client, name: str) -> dict:
    response = await client.post("/v1/folders/", json={"name": name, "description": "kept"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_taken_name_is_refused_naming_it(client, db):
    await new_folder(client, "docs")
    notes = await new_folder(client, "notes")
    before = await rows(db)

    created = await client.post("/v1/folders/", json={"name": "docs"})
    renamed = await client.patch(f"/v1/folders/{notes['id']}", json={"name": "docs", "description": "lost"})

    assert (created.status_code, renamed.status_code) == (409, 409)
    assert "'docs'" in created.json()["detail"] and "'docs'" in renamed.json()["detail"]
    assert await rows(db) == before


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        ({"name": "x", "embedding": "no-provider"}, 422, "embedding"),
        ({"name": "x", "embedding": "openai/unheard-of-model"}, 400, "openai/unheard-of-model"),
        ({"name": "x", "embedding_config": {"handle": "local/other-model"}}, 400, "local/other-model"),
        ({"name": ""}, 422, "name"),
        ({"name": "x", "embedding_chunk_size": 0}, 422, "embedding_chunk_size"),
    ],
)
async def test_bad_embedding_or_name_creates_nothing(client, db, body, status, named):
    before = await rows(db)

    response = await client.post("/v1/folders/", json=body)

    assert response.status_code == status, response.text
    assert named in response.text
    assert await rows(db) == before


async def test_the_embedding_model_cannot_change(client, db):
    folder = await new_folder(client, "docs")
    before = await rows(db)
    same = {**folder["embedding_config"]}
    other = {**same, "handle": "openai/text-embedding-3-small"}

    refused = await client.patch(f"/v1/folders/{folder['id']}", json={"description": "lost", "embedding_config": other})
    accepted = await client.patch(f"/v1/folders/{folder['id']}", json={"embedding_config": same})

    assert refused.status_code == 409 and "fixed at creation" in refused.json()["detail"]
    assert accepted.status_code == 200 and accepted.json() == {**folder, "updated_at": accepted.json()["updated_at"]}
    assert await rows(db) == before


async def test_unknown_folders_and_agents_are_404_and_change_nothing(client, db):
    agent = await create_agent(client)
    folder = await new_folder(client, "docs")
    assert (await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}")).status_code == 200
    before = await rows(db)

    answers = {
        "retrieve": await client.get(f"/v1/folders/{UNKNOWN_FOLDER}"),
        "update": await client.patch(f"/v1/folders/{UNKNOWN_FOLDER}", json={"name": "y"}),
        "delete": await client.delete(f"/v1/folders/{UNKNOWN_FOLDER}"),
        "folder agents": await client.get(f"/v1/folders/{UNKNOWN_FOLDER}/agents"),
        "attach unknown folder": await client.patch(f"/v1/agents/{agent['id']}/folders/attach/{UNKNOWN_FOLDER}"),
        "detach unknown folder": await client.patch(f"/v1/agents/{agent['id']}/folders/detach/{UNKNOWN_FOLDER}"),
        "attach to unknown agent": await client.patch(f"/v1/agents/{UNKNOWN_AGENT}/folders/attach/{folder['id']}"),
        "detach from unknown agent": await client.patch(f"/v1/agents/{UNKNOWN_AGENT}/folders/detach/{folder['id']}"),
        "unknown agent's folders": await client.get(f"/v1/agents/{UNKNOWN_AGENT}/folders"),
    }

    assert {name: answer.status_code for name, answer in answers.items()} == dict.fromkeys(answers, 404)
    assert all(UNKNOWN_FOLDER in a.text or UNKNOWN_AGENT in a.text for a in answers.values())
    assert await rows(db) == before


async def test_detaching_a_folder_that_is_not_attached_is_404(client, db):
    agent = await create_agent(client)
    folder = await new_folder(client, "docs")
    before = await rows(db)

    response = await client.patch(f"/v1/agents/{agent['id']}/folders/detach/{folder['id']}")

    assert response.status_code == 404 and "is not attached" in response.json()["detail"]
    assert await rows(db) == before


async def test_malformed_ids_are_422(client):
    assert (await client.get("/v1/folders/folder-1")).status_code == 422
    assert (await client.patch(f"/v1/agents/agent-1/folders/attach/{UNKNOWN_FOLDER}")).status_code == 422

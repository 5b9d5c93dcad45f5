"""An agent's folders set on agent create and update (`folder_ids`, and its deprecated alias
`source_ids`): each folder comes as through the attach route, with views of its processed files and
the three file tools; update makes the set exactly the list given; an unknown folder, or another
organization's, is a 404 that names it and changes nothing. Files are stored already processed
(tests/support/folder_files.py), without the worker."""

import asyncio

import pytest
from pydantic import SecretStr
from sqlalchemy import text

from memvm.db.uow import transaction
from memvm.files import views
from tests.support.api import app_client, create_agent, organization_keys
from tests.support.folder_files import GUIDE, Setup, add_file, agent_with_folder, views_of

FILE_TOOLS = ["grep_files", "open_files", "semantic_search_files"]
BASE_TOOLS = ["conversation_search", "memory_insert", "memory_replace"]
UNKNOWN_FOLDER = "source-00000000-0000-4000-8000-000000000000"
OTHER_UNKNOWN = "source-00000000-0000-4000-8000-000000000001"
ADMIN = "admin-key"


async def folder_with_guide(client, db, sessionmaker) -> Setup:
    """A folder "docs" holding the processed file docs/guide.md (given to a first agent, whose
    attach makes the folder; the agents under test get the file from the folder)."""
    setup = await agent_with_folder(client, db, "docs")
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE, embed=False)
    return setup


async def new_folder(client, name: str, **headers) -> str:
    response = await client.post("/v1/folders/", json={"name": name}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["id"]


def tool_names(state: dict) -> list[str]:
    return sorted(tool["name"] for tool in state["tools"])


async def links(db) -> list[tuple]:
    return [tuple(row) for row in await db.fetch("SELECT agent_id, folder_id FROM agent_folder ORDER BY agent_id, folder_id")]


@pytest.mark.parametrize("field", ["folder_ids", "source_ids"])
async def test_create_attaches_the_folders_with_their_files_and_the_file_tools(client, db, sessionmaker, field):
    docs = await folder_with_guide(client, db, sessionmaker)
    notes = await new_folder(client, "notes")

    agent = await create_agent(client, **{field: [docs.folder_id, notes, docs.folder_id]})

    assert [folder["id"] for folder in agent["sources"]] == [docs.folder_id, notes]
    assert tool_names(agent) == sorted(BASE_TOOLS + FILE_TOOLS)
    assert [(block["label"], block["is_open"]) for block in agent["memory"]["file_blocks"]] == [("docs/guide.md", True)]
    assert await views_of(client, agent["id"]) == [("docs/guide.md", True)]
    prompt = (await client.get(f"/v1/agents/{agent['id']}/context")).json()["system_prompt"]
    assert '<directory name="docs">' in prompt and '<directory name="notes">' in prompt
    assert "1: # Guide" in prompt
    listed = await client.get(f"/v1/folders/{notes}/agents")
    assert listed.json() == [agent["id"]]


async def test_folder_ids_win_over_source_ids(client, db):
    docs, notes = await new_folder(client, "docs"), await new_folder(client, "notes")

    agent = await create_agent(client, folder_ids=[docs], source_ids=[notes])
    updated = await client.patch(f"/v1/agents/{agent['id']}", json={"folder_ids": [notes], "source_ids": [docs]})

    assert [folder["id"] for folder in agent["sources"]] == [docs]
    assert [folder["id"] for folder in updated.json()["sources"]] == [notes]


async def test_update_makes_the_folders_exactly_the_list_and_the_last_one_takes_the_file_tools(client, db, sessionmaker):
    docs = await folder_with_guide(client, db, sessionmaker)
    notes = await new_folder(client, "notes")
    agent = await create_agent(client, folder_ids=[docs.folder_id])
    path = f"/v1/agents/{agent['id']}"

    replaced = await client.patch(path, json={"folder_ids": [notes]})

    assert replaced.status_code == 200, replaced.text
    assert [folder["id"] for folder in replaced.json()["sources"]] == [notes]
    assert tool_names(replaced.json()) == sorted(BASE_TOOLS + FILE_TOOLS)
    assert await views_of(client, agent["id"]) == []

    restored = await client.patch(path, json={"source_ids": [notes, docs.folder_id]})

    assert [folder["id"] for folder in restored.json()["sources"]] == [notes, docs.folder_id]
    assert await views_of(client, agent["id"]) == [("docs/guide.md", True)]

    emptied = await client.patch(path, json={"folder_ids": []})

    assert emptied.json()["sources"] == [] and tool_names(emptied.json()) == BASE_TOOLS
    assert await views_of(client, agent["id"]) == []
    assert "<directories>" not in (await client.get(f"{path}/context")).json()["system_prompt"]
    untouched = await client.patch(path, json={"description": "folders unchanged"})
    assert untouched.json()["sources"] == [] and tool_names(untouched.json()) == BASE_TOOLS


async def test_an_unknown_folder_is_404_naming_it_and_changes_nothing(client, db):
    docs = await new_folder(client, "docs")
    agent = await create_agent(client, folder_ids=[docs])
    agents_before, links_before = await db.fetchval("SELECT count(*) FROM agent"), await links(db)

    created = await client.post("/v1/agents/", json={"name": "lost", "folder_ids": [docs, UNKNOWN_FOLDER, OTHER_UNKNOWN]})
    updated = await client.patch(f"/v1/agents/{agent['id']}", json={"folder_ids": [UNKNOWN_FOLDER], "description": "lost"})
    malformed = await client.post("/v1/agents/", json={"source_ids": ["docs"]})

    assert (created.status_code, updated.status_code, malformed.status_code) == (404, 404, 422)
    assert created.json()["detail"] == f"Folders not found: {UNKNOWN_FOLDER}, {OTHER_UNKNOWN}."
    assert UNKNOWN_FOLDER in updated.json()["detail"]
    assert "'docs' is not a folder id" in malformed.text
    assert await db.fetchval("SELECT count(*) FROM agent") == agents_before and await links(db) == links_before
    assert (await client.get(f"/v1/agents/{agent['id']}")).json()["description"] is None


async def test_another_organization_s_folder_is_404(settings, db):
    async with app_client(settings.model_copy(update={"admin_api_key": SecretStr(ADMIN)})) as client:
        key_a, key_b = await organization_keys(client, ADMIN, "a", "b")
        theirs = await new_folder(client, "docs", **key_a)
        agent = (await client.post("/v1/agents/", json={}, headers=key_b)).json()
        agents_before = await db.fetchval("SELECT count(*) FROM agent")

        created = await client.post("/v1/agents/", json={"folder_ids": [theirs]}, headers=key_b)
        updated = await client.patch(f"/v1/agents/{agent['id']}", json={"folder_ids": [theirs]}, headers=key_b)

    assert (created.status_code, updated.status_code) == (404, 404)
    assert theirs in created.json()["detail"] and theirs in updated.json()["detail"]
    assert await db.fetchval("SELECT count(*) FROM agent") == agents_before and await links(db) == []


async def test_an_update_of_the_folders_waits_for_a_turn_s_files_lock_before_locking_the_agent(client, db, sessionmaker):
    """A turn's open_files holds the agent's files lock, then locks the agent row to recompile. An
    update of folder_ids takes the files lock first too: had it locked the agent row first, each would
    wait for the other, a deadlock and an error for one of them."""
    docs = await new_folder(client, "docs")
    agent = await create_agent(client)
    organization = await db.fetchval("SELECT organization_id FROM agent WHERE id = $1", agent["id"])
    async with transaction(sessionmaker, organization) as turn:
        await turn.execute(text("SET LOCAL lock_timeout = '10s'"))
        await views.lock_files(turn, agent["id"])
        update = asyncio.create_task(client.patch(f"/v1/agents/{agent['id']}", json={"folder_ids": [docs]}))
        for _ in range(500):  # until the update waits for a lock
            if await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the update never waited for the files lock")
        await turn.execute(text("SELECT 1 FROM agent WHERE id = :id FOR NO KEY UPDATE"), {"id": agent["id"]})  # the recompile
    response = await asyncio.wait_for(update, 10)

    assert response.status_code == 200, response.text
    assert [folder["id"] for folder in response.json()["sources"]] == [docs]

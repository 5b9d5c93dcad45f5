"""The lock order of folders, files and agents (files/service.py's docstring) under concurrent
requests: a detach racing a folder delete waits for it instead of deadlocking, an attach racing the
worker's store of a file of that folder still gives the agent the file, and a deadlock that does
happen is a 409 to retry, not a 500. A second connection holds a lock to force each interleaving."""

import asyncio
from collections.abc import Coroutine
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvm.db.uow import transaction
from memvm.files import service, views
from memvm.files.processing import process_next
from memvm.prompts.service import recompiles_at_end
from tests.support.api import create_agent
from tests.support.folder_files import GUIDE, Setup, add_file, agent_with_folder, views_of
from tests.support.pg import until_waiting


@pytest.fixture
def settings(settings):
    return settings.model_copy(update={"embedding_worker": False})  # the tests drive the file worker


def detach_route(client, setup: Setup) -> Coroutine[Any, Any, httpx.Response]:
    return client.patch(f"/v1/agents/{setup.agent_id}/folders/detach/{setup.folder_id}")


def update_to_no_folders(client, setup: Setup) -> Coroutine[Any, Any, httpx.Response]:
    return client.patch(f"/v1/agents/{setup.agent_id}", json={"folder_ids": []})


def delete_agent(client, setup: Setup) -> Coroutine[Any, Any, httpx.Response]:
    return client.delete(f"/v1/agents/{setup.agent_id}")


@pytest.mark.parametrize(("detach", "status"), [(detach_route, 404), (update_to_no_folders, 200), (delete_agent, 200)])
async def test_a_detach_racing_a_folder_delete_waits_for_the_delete_instead_of_deadlocking(
    client, db, sessionmaker, detach, status
):
    """The delete has locked the folder and its files and cascaded to the agent's link and views; it
    locks the agent row last (the recompile). Had the detach (the route, an agent update that drops
    the folder, the agent's deletion) locked the agent row first, it would wait for the link row the
    delete holds while the delete waits for the agent row: a deadlock. It waits for the folder instead."""
    setup = await agent_with_folder(client, db)
    await add_file(sessionmaker, setup, "docs/guide.md", GUIDE, embed=False)
    async with transaction(sessionmaker, setup.organization_id) as deleting, recompiles_at_end(deleting):
        await service.delete_folder(deleting, setup.folder_id)  # the agent row is locked on leaving, as a delete ends
        detaching = asyncio.create_task(detach(client, setup))
        await until_waiting(db, detaching)
    response = await asyncio.wait_for(detaching, 10)

    assert response.status_code == status, response.text
    if status == 404:
        assert response.json()["detail"] == f"Folder {setup.folder_id!r} not found."
    assert await db.fetchval("SELECT count(*) FROM folder") == 0
    assert await db.fetchval("SELECT count(*) FROM agent_file") == 0
    agent = await client.get(f"/v1/agents/{setup.agent_id}")
    if detach is delete_agent:
        assert agent.status_code == 404, agent.text
    else:
        assert agent.json()["sources"] == [], agent.text


async def test_an_attach_racing_the_worker_s_store_of_a_file_of_the_folder_gives_the_agent_the_file(client, db, sessionmaker):
    """The worker stores the file's text, then opens it for the agents the folder is attached to; the
    attach reads the folder's processed files. Each reads what is committed, so unless one waits for
    the other (the folder's lock) the worker misses the new agent and the attach misses the new file.
    The first agent's files lock, held here, stops the worker between storing and committing."""
    first = await agent_with_folder(client, db)
    uploaded = await client.post(
        f"/v1/folders/{first.folder_id}/upload", files={"file": ("notes.txt", b"line one\nline two\n", "text/plain")}
    )
    assert uploaded.status_code == 200, uploaded.text
    second = await create_agent(client, model="openai/scripted-model")
    async with transaction(sessionmaker, first.organization_id) as turn:
        await views.lock_files(turn, first.agent_id)
        worker = asyncio.create_task(process_next(sessionmaker))
        await until_waiting(db, worker)
        attach = asyncio.create_task(client.patch(f"/v1/agents/{second['id']}/folders/attach/{first.folder_id}"))
        await until_waiting(db, attach, waiters=2)
    assert await asyncio.wait_for(worker, 10) == 1
    response = await asyncio.wait_for(attach, 10)

    assert response.status_code == 200, response.text
    assert await views_of(client, second["id"]) == [("docs/notes.txt", True)]
    assert await views_of(client, first.agent_id) == [("docs/notes.txt", True)]


async def test_an_attach_racing_a_file_delete_waits_for_it_and_gives_the_agent_the_files_left(client, db, sessionmaker):
    """The delete has locked the file and waits for the first agent's row (to recompile it without its
    view). Had the attach not waited for the folder, it would read the file as still there and make a
    view of it, which the delete's commit turns into a broken reference: a 500."""
    first = await agent_with_folder(client, db)
    file_id = await add_file(sessionmaker, first, "docs/guide.md", GUIDE, embed=False)
    second = await create_agent(client, model="openai/scripted-model")
    async with transaction(sessionmaker, first.organization_id) as holding:
        await holding.execute(text("SELECT 1 FROM agent WHERE id = :id FOR NO KEY UPDATE"), {"id": first.agent_id})
        deleting = asyncio.create_task(client.delete(f"/v1/folders/{first.folder_id}/{file_id}"))
        await until_waiting(db, deleting)
        attach = asyncio.create_task(client.patch(f"/v1/agents/{second['id']}/folders/attach/{first.folder_id}"))
        await until_waiting(db, attach, waiters=2)
    deleted = await asyncio.wait_for(deleting, 10)
    response = await asyncio.wait_for(attach, 10)

    assert (deleted.status_code, response.status_code) == (204, 200), response.text
    assert await views_of(client, second["id"]) == []
    assert await views_of(client, first.agent_id) == []


async def test_a_deadlock_that_escapes_is_a_409_to_retry_that_changes_nothing(client, db, sessionmaker):
    """A transaction that breaks the lock order (here: the agent row, then its files lock) deadlocks
    with a detach; PostgreSQL fails the detach, which waited first."""
    setup = await agent_with_folder(client, db)
    detach_path = f"/v1/agents/{setup.agent_id}/folders/detach/{setup.folder_id}"
    async with transaction(sessionmaker, setup.organization_id) as rogue:
        await rogue.execute(text("SELECT 1 FROM agent WHERE id = :id FOR NO KEY UPDATE"), {"id": setup.agent_id})
        detach = asyncio.create_task(client.patch(detach_path))
        await until_waiting(db, detach)  # holding the folder and the files lock, waiting for the agent row
        await views.lock_files(rogue, setup.agent_id)
    response = await asyncio.wait_for(detach, 10)

    assert response.status_code == 409, response.text
    assert response.json() == {"detail": "The change collided with a concurrent change; retry it."}
    assert response.headers["x-should-retry"] == "true"
    assert await db.fetchval("SELECT count(*) FROM agent_folder") == 1

"""Folders (Letta's sources) through the official SDK against a real `memvm serve`: every folder
method of letta-client 1.12.1 except files (they come with the upload pipeline), attaching folders
to agents, and the agent's `sources`. Bad input is in tests/api/test_folders.py."""

from letta_client import AsyncLetta, ConflictError, NotFoundError
from letta_client.types import Folder

from tests.support.sdk import new_agent, unique

LOCAL_EMBEDDING = "local/all-MiniLM-L6-v2"


async def test_folder_create_retrieve_update_list_and_delete(letta: AsyncLetta):
    name = unique("docs")
    created = await letta.folders.create(
        name=name, description="project docs", instructions="Read before coding.", metadata={"team": "core"}
    )

    assert isinstance(created, Folder) and created.id.startswith("source-")
    assert (created.name, created.description, created.instructions) == (name, "project docs", "Read before coding.")
    assert created.metadata == {"team": "core"}
    assert created.embedding_config.embedding_dim == 384 and created.embedding_config.embedding_chunk_size == 300
    assert await letta.folders.retrieve(created.id) == created

    renamed = unique("manuals")
    updated = await letta.folders.update(created.id, name=renamed, instructions="Cite the page.")
    assert (updated.name, updated.description, updated.instructions) == (renamed, "project docs", "Cite the page.")
    assert updated.embedding_config == created.embedding_config and updated.updated_at > created.updated_at

    other = await letta.folders.create(name=unique("notes"), embedding_chunk_size=512)
    assert other.embedding_config.embedding_chunk_size == 512
    by_name = [folder.id async for folder in letta.folders.list(name=renamed)]
    first_two = [folder.id async for folder in letta.folders.list(limit=1000)][-2:]
    newest_first = [folder.id async for folder in letta.folders.list(order="desc", limit=2)]
    after_first = [folder.id async for folder in letta.folders.list(after=created.id, limit=1000)]
    assert by_name == [created.id]
    assert first_two == [created.id, other.id] and newest_first == [other.id, created.id]
    assert after_first[-1] == other.id and created.id not in after_first

    assert await letta.folders.delete(created.id) is None
    try:
        await letta.folders.retrieve(created.id)
        raise AssertionError("the deleted folder is still there")
    except NotFoundError as error:
        assert created.id in str(error)
    assert [folder.id async for folder in letta.folders.list(name=renamed)] == []


async def test_folder_names_are_unique(letta: AsyncLetta):
    name = unique("shared")
    await letta.folders.create(name=name)
    try:
        await letta.folders.create(name=name)
        raise AssertionError("a second folder with the same name was created")
    except ConflictError as error:
        assert name in str(error)
    assert len([folder async for folder in letta.folders.list(name=name)]) == 1


async def test_attach_list_and_detach_folders(letta: AsyncLetta):
    agent = await new_agent(letta)
    other_agent = await new_agent(letta)
    docs = await letta.folders.create(name=unique("docs"), embedding=LOCAL_EMBEDDING)
    assert docs.embedding_config.handle == LOCAL_EMBEDDING
    notes = await letta.folders.create(name=unique("notes"))

    assert await letta.agents.folders.attach(docs.id, agent_id=agent.id) is None
    assert await letta.agents.folders.attach(notes.id, agent_id=agent.id) is None
    assert await letta.agents.folders.attach(docs.id, agent_id=agent.id) is None  # again: no change
    await letta.agents.folders.attach(docs.id, agent_id=other_agent.id)

    attached = [folder async for folder in letta.agents.folders.list(agent.id)]
    assert [folder.id for folder in attached] == [docs.id, notes.id]
    assert attached[0].name == docs.name and attached[0].vector_db_provider == "native"
    assert sorted(await letta.folders.agents.list(docs.id)) == sorted([agent.id, other_agent.id])
    assert await letta.folders.agents.list(notes.id) == [agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [docs.id, notes.id]
    assert state.sources[0].embedding_config == docs.embedding_config

    assert await letta.agents.folders.detach(docs.id, agent_id=agent.id) is None
    assert [folder.id async for folder in letta.agents.folders.list(agent.id)] == [notes.id]
    assert await letta.folders.agents.list(docs.id) == [other_agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [notes.id]


async def test_deleting_a_folder_or_an_agent_removes_its_links(letta: AsyncLetta):
    agent = await new_agent(letta)
    leaving_agent = await new_agent(letta)
    kept = await letta.folders.create(name=unique("kept"))
    doomed = await letta.folders.create(name=unique("doomed"))
    for folder in (kept, doomed):
        await letta.agents.folders.attach(folder.id, agent_id=agent.id)
    await letta.agents.folders.attach(kept.id, agent_id=leaving_agent.id)

    await letta.folders.delete(doomed.id)
    await letta.agents.delete(leaving_agent.id)

    assert [folder.id async for folder in letta.agents.folders.list(agent.id)] == [kept.id]
    assert await letta.folders.agents.list(kept.id) == [agent.id]
    state = await letta.agents.retrieve(agent.id, include=["agent.sources"])
    assert [source.id for source in state.sources] == [kept.id]

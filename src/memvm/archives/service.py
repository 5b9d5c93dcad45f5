"""Archives and passages. Operations on an agent's archives take the agent (or its id) from a caller
that has already looked it up. Vectors are computed by the caller before the transaction opens (an
embedding call never holds a transaction); every write recompiles the prompts of the agents
that read the archive, so their <memory_metadata> counts stay true.

Lock order, as everywhere: blocks, then archives (an archive's row, which carries its counts, then its
tag rows), then agents (in id order, as a recompile locks them). A turn's step locks its agent's archive
as it inserts and the readers at its end, after the blocks its edits locked (prompts.recompiles_at_end),
so every other writer of passages locks the archive before the agents it recompiles too: one that held
an agent while a step held the archive and waited for that agent at its end was a deadlock. One step
runs its tool calls in the model's order, so an insert before an edit of a shared block in the same
step still locks an archive before a block; should that meet a writer of the opposite order,
PostgreSQL aborts one of the two."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.archives import repository
from memvm.archives.repository import ArchiveToWrite, SearchScope, Writer
from memvm.archives.schemas import ArchiveCreate, ArchiveUpdate, PassageCreate, StoredPassage
from memvm.db.pagination import PageRequest, fetch_page
from memvm.db.tenancy import owned
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import Conflict, NotFound
from memvm.ids import new_id
from memvm.orm import Agent, AgentArchive, Archive, Passage
from memvm.prompts.service import lock_readers, recompile_agents, recompile_readers


async def create_archive(session: AsyncSession, data: ArchiveCreate, model: EmbeddingModel) -> Archive:
    archive = Archive(
        id=new_id("archive"),
        name=data.name,
        description=data.description,
        embedding_model=model.model,
        embedding_dim=model.dim,
        metadata_=data.metadata,
    )
    session.add(archive)
    await session.flush()
    return archive


async def get_archive(session: AsyncSession, archive_id: str) -> Archive:
    archive = await owned(session, Archive, archive_id)
    if archive is None:
        raise NotFound(f"Archive {archive_id!r} not found.")
    return archive


async def list_archives(session: AsyncSession, page: PageRequest, *, name: str | None, agent_id: str | None) -> list[Archive]:
    return await fetch_page(session, repository.archives_query(name=name, agent_id=agent_id), Archive, page)


async def update_archive(session: AsyncSession, archive_id: str, data: ArchiveUpdate) -> Archive:
    archive = await get_archive(session, archive_id)
    for field, value in data.model_dump(exclude_unset=True, exclude_none=True).items():
        setattr(archive, field, value)
    await session.flush()
    return archive


async def delete_archive(session: AsyncSession, archive_id: str) -> None:
    # Before its readers: see the module's lock order.
    archive = await repository.lock_archive(session, archive_id, to="delete")
    if archive is None:
        raise NotFound(f"Archive {archive_id!r} not found.")
    readers = await lock_readers(session, archive_id)  # before its links go with it
    await session.delete(archive)
    await session.flush()
    await recompile_agents(session, readers)


async def archives_of(session: AsyncSession, agent_id: str) -> list[Archive]:
    """The archives an agent reads, in the order they were attached."""
    return await repository.archives_of(session, agent_id)


async def all_archives(session: AsyncSession) -> list[Archive]:
    return await repository.all_archives(session)


async def search_scope(session: AsyncSession, agent_id: str) -> SearchScope | None:
    """In one round trip: what searching this agent's archives needs (None: no such agent)."""
    return await repository.search_scope(session, agent_id)


async def attach_archive(session: AsyncSession, agent: Agent, archive_id: str, agent_model: EmbeddingModel) -> None:
    """Share an archive with an agent (locked by the caller). Its vectors must come from the agent's
    embedding model: search compares like with like, so mixing models is refused."""
    archive = await get_archive(session, archive_id)
    if archive.embedding_model != agent_model.model:
        raise Conflict(
            f"Archive {archive_id!r} holds vectors of {archive.embedding_model!r} but agent {agent.id!r} embeds with "
            f"{agent_model.model!r}. Attach archives of the same model, "
            f"or create the agent with embedding={archive.embedding_model!r}."
        )
    if await repository.link(session, agent.id, archive_id) is None:
        # Locked after the link is known to be new: were the agent a reader already, a delete of the
        # archive would wait for it while this waited for the delete.
        if await repository.lock_archive(session, archive_id, to="link") is None:
            raise NotFound(f"Archive {archive_id!r} not found.")
        session.add(AgentArchive(agent_id=agent.id, archive_id=archive_id))
        await session.flush()
        await recompile_agents(session, [agent.id])


async def detach_archive(session: AsyncSession, agent: Agent, archive_id: str) -> None:
    """Stop an agent (locked by the caller) reading an archive; the archive and its passages remain."""
    if await repository.unlink(session, agent.id, archive_id) == 0:
        raise NotFound(f"Archive {archive_id!r} is not attached to agent {agent.id!r}.")
    if agent.default_archive_id == archive_id:
        agent.default_archive_id = None
    await session.flush()
    await recompile_agents(session, [agent.id])


async def archive_to_write(session: AsyncSession, archive_id: str) -> ArchiveToWrite:
    """The archive whose passages this transaction writes, locked as the update of its counts locks
    it: a concurrent delete is waited for, and then the archive is not found (an insert would fail on
    its foreign key instead)."""
    archive = await repository.lock_archive_to_write(session, archive_id)
    if archive is None:
        raise NotFound(f"Archive {archive_id!r} not found.")
    return archive


async def write_archive(session: AsyncSession, agent_id: str, model: EmbeddingModel) -> Archive | ArchiveToWrite:
    """The archive an agent's inserts go to (locked as `archive_to_write` locks it), created and
    attached on first use, or after it was deleted. The agent is only key-share locked (see
    repository.lock_writer): a lock that a recompile waits for, taken before the archive's, would
    break the lock order. Two first uses make one archive: each waits for the other's to end and
    reads the agent again (repository.wait_to_make_default_archive)."""
    agent = await repository.lock_writer(session, agent_id)
    archive = await _locked_default_archive(session, agent)
    if archive is None and agent is not None:
        await repository.wait_to_make_default_archive(session, agent_id)
        agent = await repository.lock_writer(session, agent_id)
        archive = await _locked_default_archive(session, agent)
    if agent is None:
        raise NotFound(f"Agent {agent_id!r} not found.")
    if archive is not None:
        return archive
    created = await create_archive(session, ArchiveCreate(name=f"{agent.name}'s Archive"), model)
    session.add(AgentArchive(agent_id=agent.id, archive_id=created.id))
    await session.flush()
    await repository.set_default_archive(session, agent.id, created.id)
    return created


async def _locked_default_archive(session: AsyncSession, agent: Writer | None) -> ArchiveToWrite | None:
    if agent is None or agent.default_archive_id is None:
        return None
    return await repository.lock_archive_to_write(session, agent.default_archive_id)


async def insert_passages(
    session: AsyncSession,
    archive: Archive | ArchiveToWrite,
    items: Sequence[tuple[PassageCreate, list[float]]],
    *,
    model: EmbeddingModel,
    writer: Actor,
    source_message_id: str | None = None,
) -> list[StoredPassage]:
    if model.model != archive.embedding_model:
        raise Conflict(f"Archive {archive.id!r} holds vectors of {archive.embedding_model!r}, not {model.model!r}.")
    rows: list[dict[str, Any]] = [
        {"id": new_id("passage"), "archive_id": archive.id, "text": item.text, "tags": sorted(set(item.tags))}
        | {"embedding": vector, "embedding_model": model.model, "embedding_dim": model.dim}
        | {"metadata": item.metadata, "created_at": item.created_at}
        | {"writer_type": writer.type, "writer_id": writer.id, "step_id": writer.step_id, "source_message_id": source_message_id}
        for item, vector in items
    ]
    created = await repository.insert_passages(session, rows)
    await repository.recount(session, archive.id, [row["tags"] for row in rows], each=1)
    await recompile_readers(session, archive.id)
    return [
        StoredPassage(row["id"], archive.id, item.text, row["tags"], item.metadata, model.model, model.dim, writer.id, at)
        for row, (item, _), at in zip(rows, items, created, strict=True)
    ]


async def delete_agent_passage(session: AsyncSession, agent_id: str, passage_id: str) -> None:
    """Delete a passage, but only one in an archive this agent reads."""
    passage = await repository.passage_of_agent(session, agent_id, passage_id)
    if passage is None:
        raise NotFound(f"Passage {passage_id!r} is not in any archive of agent {agent_id!r}.")
    await delete_archive_passages(session, passage.archive_id, [passage_id])


async def delete_archive_passages(session: AsyncSession, archive_id: str, passage_ids: Sequence[str]) -> None:
    # The archive before its passages, as its delete (whose cascade deletes them) locks them.
    await archive_to_write(session, archive_id)
    if await repository.delete_passages(session, archive_id, passage_ids) == 0:
        raise NotFound(f"Passage {passage_ids[0]!r} not found in archive {archive_id!r}.")
    await recompile_readers(session, archive_id)


async def list_agent_passages(
    session: AsyncSession,
    agent_id: str,
    *,
    search: str | None,
    after: str | None,
    before: str | None,
    limit: int,
    ascending: bool,
) -> list[Passage]:
    """Passages of every archive the agent reads; `after`/`before` are passage ids bounding the range in time."""
    bounds = {name: await _created_at(session, value) for name, value in (("after", after), ("before", before))}
    return await repository.agent_passages(session, agent_id, search=search, limit=limit, ascending=ascending, **bounds)


async def passages_of(session: AsyncSession, archive_id: str) -> list[Passage]:
    """Every passage of the archive, oldest first (an agent-file export)."""
    return await repository.passages_of(session, archive_id)


async def agents_of_archive(session: AsyncSession, archive_id: str) -> list[str]:
    await get_archive(session, archive_id)
    return await repository.agent_ids_of(session, archive_id)


async def _created_at(session: AsyncSession, passage_id: str | None) -> datetime | None:
    if passage_id is None:
        return None
    passage = await owned(session, Passage, passage_id)
    if passage is None:
        raise NotFound(f"Cursor passage {passage_id!r} not found; pass the id of a passage from a previous page.")
    return passage.created_at

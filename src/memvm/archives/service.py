"""Archives and passages. Operations on an agent's archives take the agent (or its id) from a caller
that has already looked it up. Vectors are computed by the caller before the transaction opens (an
embedding call never holds a transaction); every write recompiles the prompts of the agents
that read the archive, so their <memory_metadata> counts stay true."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from memvm.actors import Actor
from memvm.archives import repository
from memvm.archives.repository import SearchScope
from memvm.archives.schemas import ArchiveCreate, ArchiveUpdate, PassageCreate
from memvm.db.pagination import PageRequest, fetch_page
from memvm.db.tenancy import owned
from memvm.embeddings.ports import EmbeddingModel
from memvm.errors import Conflict, NotFound
from memvm.ids import new_id
from memvm.orm import Agent, AgentArchive, Archive, Passage
from memvm.prompts.service import recompile_agents, recompiles_deferred


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
    archive = await get_archive(session, archive_id)
    readers = await repository.lock_readers(session, archive_id)  # before the archive: see lock_readers
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


async def write_archive(session: AsyncSession, agent: Agent, model: EmbeddingModel) -> Archive:
    """The archive an agent's inserts go to, created (and attached) on first use."""
    if agent.default_archive_id is not None:
        return await get_archive(session, agent.default_archive_id)
    archive = await create_archive(session, ArchiveCreate(name=f"{agent.name}'s Archive"), model)
    session.add(AgentArchive(agent_id=agent.id, archive_id=archive.id))
    agent.default_archive_id = archive.id
    await session.flush()
    return archive


async def insert_passages(
    session: AsyncSession,
    archive: Archive,
    items: Sequence[tuple[PassageCreate, list[float]]],
    *,
    model: EmbeddingModel,
    writer: Actor,
    source_message_id: str | None = None,
) -> list[Passage]:
    if model.model != archive.embedding_model:
        raise Conflict(f"Archive {archive.id!r} holds vectors of {archive.embedding_model!r}, not {model.model!r}.")
    readers = await _readers(session, archive.id)
    passages = [
        Passage(
            id=new_id("passage"),
            archive_id=archive.id,
            text=item.text,
            embedding=vector,
            embedding_model=model.model,
            embedding_dim=model.dim,
            tags=sorted(set(item.tags)),
            metadata_=item.metadata,
            writer_type=writer.type,
            writer_id=writer.id,
            step_id=writer.step_id,
            source_message_id=source_message_id,
            **({"created_at": item.created_at} if item.created_at else {}),
        )
        for item, vector in items
    ]
    session.add_all(passages)
    await session.flush()
    await repository.recount(session, archive.id, [passage.tags for passage in passages], each=1)
    await recompile_agents(session, readers)
    return passages


async def delete_agent_passage(session: AsyncSession, agent_id: str, passage_id: str) -> None:
    """Delete a passage, but only one in an archive this agent reads."""
    passage = await repository.passage_of_agent(session, agent_id, passage_id)
    if passage is None:
        raise NotFound(f"Passage {passage_id!r} is not in any archive of agent {agent_id!r}.")
    await delete_archive_passages(session, passage.archive_id, [passage_id])


async def delete_archive_passages(session: AsyncSession, archive_id: str, passage_ids: Sequence[str]) -> None:
    readers = await _readers(session, archive_id)
    if await repository.delete_passages(session, archive_id, passage_ids) == 0:
        raise NotFound(f"Passage {passage_ids[0]!r} not found in archive {archive_id!r}.")
    await recompile_agents(session, readers)


async def _readers(session: AsyncSession, archive_id: str) -> list[str]:
    """The agents whose prompts a change of the archive's passages changes. Outside a turn they are
    locked before the archive's counts, in the recompile's order (see repository.lock_readers).
    Inside one (recompiles deferred) they are locked at the step's end, after the blocks it locked,
    as `recompiles_at_end` orders it: taking them mid-step would hold other agents while a later
    call of the step waits for a block."""
    if recompiles_deferred(session):
        return await repository.agent_ids_of(session, archive_id)
    return await repository.lock_readers(session, archive_id)


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
